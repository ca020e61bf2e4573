#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <numbers>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

using Outcome = Observation::Outcome;

ParamSpec Float(std::string name, double min, double max) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.min = min;
  spec.max = max;
  return spec;
}

SearchSpace BraninSpace() {
  SearchSpace space;
  space.params.push_back(Float("x0", -5, 10));
  space.params.push_back(Float("x1", 0, 15));
  return space;
}

double Branin(const Params& p) {
  const double x0 = std::get<double>(p.at("x0")), x1 = std::get<double>(p.at("x1"));
  const double pi = std::numbers::pi;
  const double q = x1 - 5.1 / (4 * pi * pi) * x0 * x0 + 5 / pi * x0 - 6;
  return q * q + 10 * (1 - 1 / (8 * pi)) * std::cos(x0) + 10;
}

std::unique_ptr<Sampler> Bayesian(SearchSpace space, uint64_t seed, int max_observations = 0) {
  BayesianOptions options;
  options.seed = seed;
  options.max_observations = max_observations;
  return NewBayesianSampler(std::move(space), options);
}

SampleRequest At(int64_t n, absl::Span<const Observation> history,
                 std::vector<std::string>* notes = nullptr) {
  SampleRequest request;
  request.trial_number = n;
  request.history = history;
  request.notes = notes;
  return request;
}

Observation Done(Params params, double value, Outcome outcome = Outcome::kCompleted) {
  Observation o;
  o.params = std::move(params);
  o.outcome = outcome;
  o.value = value;
  return o;
}

// Runs `trials` sequential trials of f; returns the history.
std::vector<Observation> RunTrials(Sampler& sampler, int trials,
                                   const std::function<double(const Params&)>& f) {
  std::vector<Observation> history;
  for (int t = 0; t < trials; ++t) {
    absl::StatusOr<Params> p = sampler.Ask(At(t, history));
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) break;
    history.push_back(Done(*p, f(*p)));
  }
  return history;
}

double Best(const std::vector<Observation>& history) {
  double best = INFINITY;
  for (const Observation& o : history) best = std::min(best, o.value.value_or(INFINITY));
  return best;
}

// Unit-cube coordinates of params in space (all parameters present).
std::vector<double> Units(const SearchSpace& space, const Params& p) {
  std::vector<double> u;
  for (const ParamSpec& spec : space.params) u.push_back(ToUnit(spec, p.at(spec.name)));
  return u;
}

double Distance(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
  return std::sqrt(s);
}

TEST(BayesianSamplerTest, InitialDesignIsTheScrambledSobolSequence) {
  auto bayes = Bayesian(BraninSpace(), 7);
  auto sobol = NewSobolSampler(BraninSpace(), 7);
  std::vector<Observation> history;
  for (int t = 0; t < 5; ++t) {  // the default design for 2 parameters is 5 points
    absl::StatusOr<Params> p = bayes->Ask(At(t, history));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, *sobol->Ask(At(t, {})));
    history.push_back(Done(*p, Branin(*p)));
  }
}

TEST(BayesianSamplerTest, SameSeedAndHistoryGiveTheSameSuggestions) {
  auto a = Bayesian(BraninSpace(), 3);
  auto b = Bayesian(BraninSpace(), 3);
  const std::vector<Observation> ha = RunTrials(*a, 15, Branin);
  const std::vector<Observation> hb = RunTrials(*b, 15, Branin);
  ASSERT_EQ(ha.size(), hb.size());
  for (size_t i = 0; i < ha.size(); ++i) EXPECT_EQ(ha[i].params, hb[i].params) << i;
  // A fresh sampler given the same history proposes the same next point as well.
  auto c = Bayesian(BraninSpace(), 3);
  auto d = Bayesian(BraninSpace(), 3);
  EXPECT_EQ(*c->Ask(At(15, ha)), *d->Ask(At(15, ha)));
}

TEST(BayesianSamplerTest, BeatsRandomOnBraninWithinThirtyTrials) {
  std::vector<double> bayes, random;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    auto b = Bayesian(BraninSpace(), seed);
    bayes.push_back(Best(RunTrials(*b, 30, Branin)));
    auto r = NewRandomSampler(BraninSpace(), seed);
    random.push_back(Best(RunTrials(*r, 30, Branin)));
  }
  std::sort(bayes.begin(), bayes.end());
  std::sort(random.begin(), random.end());
  EXPECT_LT(bayes[2], random[2]);
  EXPECT_LT(bayes[2] - 0.397887, 0.05);  // and gets close to the optimum 0.397887
}

TEST(BayesianSamplerTest, PendingTrialsGetDistinctSpreadOutSuggestions) {
  auto sampler = Bayesian(BraninSpace(), 11);
  std::vector<Observation> history = RunTrials(*sampler, 12, Branin);
  const SearchSpace space = BraninSpace();
  std::vector<std::vector<double>> batch;
  for (int k = 0; k < 8; ++k) {
    absl::StatusOr<Params> p = sampler->Ask(At(static_cast<int64_t>(history.size()), history));
    ASSERT_TRUE(p.ok()) << p.status();
    batch.push_back(Units(space, *p));
    Observation pending;
    pending.params = *p;
    history.push_back(pending);  // kPending by default
  }
  double closest = INFINITY;
  for (size_t i = 0; i < batch.size(); ++i) {
    for (size_t j = 0; j < i; ++j) closest = std::min(closest, Distance(batch[i], batch[j]));
  }
  EXPECT_GT(closest, 0.02) << "two of 8 concurrent suggestions nearly coincide";
}

TEST(BayesianSamplerTest, ConstantObjectiveKeepsProposingDistinctPoints) {
  auto sampler = Bayesian(BraninSpace(), 5);
  const std::vector<Observation> history =
      RunTrials(*sampler, 25, [](const Params&) { return 4.0; });
  ASSERT_EQ(history.size(), 25u);
  const SearchSpace space = BraninSpace();
  for (size_t i = 0; i < history.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      EXPECT_GT(Distance(Units(space, history[i].params), Units(space, history[j].params)), 1e-3)
          << i << " and " << j;
    }
  }
}

SearchSpace MixedSpace() {
  SearchSpace space;
  space.params.push_back(Float("x", -5, 5));
  ParamSpec n;
  n.name = "n";
  n.kind = ParamSpec::Kind::kInt;
  n.min = 0;
  n.max = 10;
  space.params.push_back(n);
  ParamSpec width;
  width.name = "width";
  width.kind = ParamSpec::Kind::kInt;
  width.min = 8;
  width.max = 512;
  width.log = true;
  space.params.push_back(width);
  ParamSpec c;
  c.name = "c";
  c.kind = ParamSpec::Kind::kCategorical;
  c.values = {"red", "green", "blue", "gray"};
  space.params.push_back(c);
  return space;
}

double MixedObjective(const Params& p) {
  static const std::map<std::string, double> offset = {
      {"red", 0.8}, {"green", 0.0}, {"blue", 0.35}, {"gray", 1.5}};
  const double x = std::get<double>(p.at("x"));
  const auto n = static_cast<double>(std::get<int64_t>(p.at("n")));
  const double w = std::log2(static_cast<double>(std::get<int64_t>(p.at("width"))));
  return (x - 1.7) * (x - 1.7) + 0.3 * (n - 7) * (n - 7) + 0.2 * (w - 6) * (w - 6) +
         offset.at(std::get<std::string>(p.at("c")));
}

TEST(BayesianSamplerTest, IntsAndCategoricalsComeOutFeasible) {
  auto sampler = Bayesian(MixedSpace(), 2);
  const std::vector<Observation> history = RunTrials(*sampler, 30, MixedObjective);
  ASSERT_EQ(history.size(), 30u);
  for (const Observation& o : history) {
    const int64_t n = std::get<int64_t>(o.params.at("n"));
    EXPECT_GE(n, 0);
    EXPECT_LE(n, 10);
    const int64_t w = std::get<int64_t>(o.params.at("width"));
    EXPECT_GE(w, 8);
    EXPECT_LE(w, 512);
    const std::string& c = std::get<std::string>(o.params.at("c"));
    EXPECT_TRUE(c == "red" || c == "green" || c == "blue" || c == "gray") << c;
  }
  EXPECT_LT(Best(history), 0.5);  // it also optimises through the discrete parameters
}

TEST(BayesianSamplerTest, InactiveConditionalParametersAreNeverReturned) {
  SearchSpace space;
  ParamSpec optimizer;
  optimizer.name = "optimizer";
  optimizer.kind = ParamSpec::Kind::kCategorical;
  optimizer.values = {"sgd", "adam"};
  space.params.push_back(optimizer);
  ParamSpec momentum = Float("momentum", 0, 0.99);
  momentum.when = {{"optimizer", "sgd"}};
  space.params.push_back(momentum);
  ParamSpec beta = Float("beta2", 0.9, 0.9999);
  beta.when = {{"optimizer", "adam"}};
  space.params.push_back(beta);
  space.params.push_back(Float("lr", 0, 1));
  auto sampler = Bayesian(space, 4);
  const std::vector<Observation> history = RunTrials(*sampler, 25, [](const Params& p) {
    const double lr = std::get<double>(p.at("lr"));
    if (std::get<std::string>(p.at("optimizer")) == "sgd") {
      return (lr - 0.3) * (lr - 0.3) + (std::get<double>(p.at("momentum")) - 0.9) * 0.1;
    }
    return (lr - 0.6) * (lr - 0.6) + 0.05;
  });
  ASSERT_EQ(history.size(), 25u);
  for (const Observation& o : history) {
    const bool sgd = std::get<std::string>(o.params.at("optimizer")) == "sgd";
    EXPECT_EQ(o.params.contains("momentum"), sgd);
    EXPECT_EQ(o.params.contains("beta2"), !sgd);
    for (const ParamSpec& spec : space.params) {
      if (o.params.contains(spec.name)) {
        EXPECT_TRUE(IsActive(spec, o.params)) << spec.name;
      }
    }
  }
}

TEST(BayesianSamplerTest, FailedTrialsSteerTheSearchAway) {
  // f decreases towards x = 1, but every trial above 0.6 fails: were failures ignored, the
  // model would keep extrapolating into the failing region.
  SearchSpace space;
  space.params.push_back(Float("x", 0, 1));
  auto sampler = Bayesian(space, 9);
  std::vector<Observation> history;
  int failures_after_design = 0;
  for (int t = 0; t < 30; ++t) {
    absl::StatusOr<Params> p = sampler->Ask(At(t, history));
    ASSERT_TRUE(p.ok());
    const double x = std::get<double>(p->at("x"));
    Observation o;
    o.params = *p;
    if (x > 0.6) {
      o.outcome = Outcome::kFailed;
      if (t >= 5) ++failures_after_design;
    } else {
      o.outcome = Outcome::kCompleted;
      o.value = -x;
    }
    history.push_back(o);
  }
  EXPECT_LE(failures_after_design, 8);
  EXPECT_LT(Best(history), -0.55);
}

TEST(BayesianSamplerTest, LargeHistoriesAreSubsampledWithOneNote) {
  auto sampler = Bayesian(BraninSpace(), 1, /*max_observations=*/20);
  auto random = NewRandomSampler(BraninSpace(), 2);
  std::vector<Observation> history;
  for (int t = 0; t < 30; ++t) {
    const Params p = *random->Ask(At(t, {}));
    history.push_back(Done(p, Branin(p)));
  }
  std::vector<std::string> notes;
  ASSERT_TRUE(sampler->Ask(At(30, history, &notes)).ok());
  ASSERT_TRUE(sampler->Ask(At(31, history, &notes)).ok());
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("subset of 20 of 30"), std::string::npos) << notes[0];
}

TEST(BayesianSamplerTest, PrunedTrialsCountWithTheirLastValue) {
  // Only pruned trials carry values: the model must still be used (not the design).
  auto sampler = Bayesian(BraninSpace(), 6);
  auto sobol = NewSobolSampler(BraninSpace(), 6);
  std::vector<Observation> history;
  for (int t = 0; t < 8; ++t) {
    const Params p = *sobol->Ask(At(t, {}));
    history.push_back(Done(p, Branin(p), Outcome::kPruned));
  }
  absl::StatusOr<Params> next = sampler->Ask(At(8, history));
  ASSERT_TRUE(next.ok());
  EXPECT_NE(*next, *sobol->Ask(At(8, {})));
}

TEST(BayesianSamplerTest, ExhaustedDiscreteSpaceStillAnswers) {
  SearchSpace space;
  ParamSpec c;
  c.name = "c";
  c.kind = ParamSpec::Kind::kCategorical;
  c.values = {"a", "b", "c"};
  space.params.push_back(c);
  auto sampler = Bayesian(space, 0);
  const std::vector<Observation> history = RunTrials(*sampler, 12, [](const Params& p) {
    return std::get<std::string>(p.at("c")) == "b" ? 0.0 : 1.0;
  });
  EXPECT_EQ(history.size(), 12u);
}

TEST(BayesianSamplerTest, SingleValuedCategoricalsNeedNoCoordinates) {
  SearchSpace space;
  ParamSpec only;
  only.name = "only";
  only.kind = ParamSpec::Kind::kCategorical;
  only.values = {"x"};
  space.params.push_back(only);
  auto degenerate = Bayesian(space, 0);
  EXPECT_EQ(RunTrials(*degenerate, 8, [](const Params&) { return 1.0; }).size(), 8u);
  space.params.push_back(Float("y", 0, 1));
  auto sampler = Bayesian(space, 0);
  const std::vector<Observation> history = RunTrials(
      *sampler, 12, [](const Params& p) { return std::abs(std::get<double>(p.at("y")) - 0.3); });
  ASSERT_EQ(history.size(), 12u);
  EXPECT_EQ(std::get<std::string>(history.back().params.at("only")), "x");
}

TEST(BayesianSamplerTest, EdgeCases) {
  auto empty = Bayesian(SearchSpace(), 0);
  absl::StatusOr<Params> p = empty->Ask(At(3, {}));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty());
  EXPECT_EQ(Bayesian(BraninSpace(), 0)->Ask(At(-1, {})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A space of `count` categoricals with `values` values each, named p0.. with values v0...
SearchSpace CategoricalSpace(int count, int values) {
  SearchSpace space;
  for (int i = 0; i < count; ++i) {
    ParamSpec spec;
    spec.name = absl::StrCat("p", i);
    spec.kind = ParamSpec::Kind::kCategorical;
    for (int v = 0; v < values; ++v) spec.values.push_back(absl::StrCat("v", v));
    space.params.push_back(spec);
  }
  return space;
}

int ValueOf(const Params& p, int i) {
  return std::get<std::string>(p.at(absl::StrCat("p", i)))[1] - '0';
}

// Main effects plus an interaction in the pairs (p0,p1) and (p2,p3), so that no parameter can
// be set on its own; the minimum, 0, is at v3 v1 v2 v0 alone.
double CategoricalObjective(const Params& p) {
  static const double main[4][4] = {
      {0.9, 0.6, 0.7, 0.1}, {0.5, 0.2, 0.9, 0.6}, {0.3, 0.8, 0.1, 0.6}, {0.2, 0.7, 0.4, 0.9}};
  static const double pair[2][4][4] = {
      {{0.6, 0.9, 0.3, 0.5}, {0.4, 0.7, 0.8, 0.2}, {0.9, 0.1, 0.5, 0.7}, {0.7, 0.0, 0.6, 0.5}},
      {{0.8, 0.2, 0.7, 0.4}, {0.5, 0.9, 0.3, 0.8}, {0.0, 0.6, 0.9, 0.3}, {0.6, 0.4, 0.2, 0.9}}};
  int c[4];
  for (int i = 0; i < 4; ++i) c[i] = ValueOf(p, i);
  double f = -0.6;  // main 0.1 + 0.2 + 0.1 + 0.2 and pairs 0.0 + 0.0 at the minimum
  for (int i = 0; i < 4; ++i) f += main[i][c[i]];
  return f + pair[0][c[0]][c[1]] + pair[1][c[2]][c[3]];
}

TEST(BayesianSamplerTest, FindsTheOptimumOfASmallNoiselessCategoricalProblem) {
  // 256 configurations; the model, not enumeration, has to find the one at 0.
  for (uint64_t seed : {1, 2, 3}) {
    auto sampler = Bayesian(CategoricalSpace(4, 4), seed);
    const std::vector<Observation> history = RunTrials(*sampler, 40, CategoricalObjective);
    double best = 1e300;
    for (const Observation& o : history) best = std::min(best, *o.value);
    EXPECT_NEAR(best, 0, 1e-12) << "seed " << seed;
  }
}

TEST(BayesianSamplerTest, ProposesAnUnevaluatedNeighbourOfTheBestCategoricalConfiguration) {
  // Every configuration evaluated so far is near the best one, which has unevaluated
  // neighbours: the suggestion is new (never a repeat of an evaluated configuration), and
  // with values that fall away from the best it is one of the best's neighbours.
  const SearchSpace space = CategoricalSpace(3, 4);
  const auto f = [](const Params& p) {
    return 1.0 * (ValueOf(p, 0) != 2) + 0.8 * (ValueOf(p, 1) != 1) + 0.6 * (ValueOf(p, 2) != 3);
  };
  std::vector<Observation> history;
  const auto add = [&](int a, int b, int c) {
    Params p = {{"p0", absl::StrCat("v", a)}, {"p1", absl::StrCat("v", b)},
                {"p2", absl::StrCat("v", c)}};
    history.push_back(Done(p, f(p)));
  };
  add(2, 1, 0);  // the best so far, 0.6: the optimum 2 1 3 is one change away
  for (int v : {0, 1, 3}) add(v, 1, 0);
  for (int v : {0, 2, 3}) add(2, v, 0);
  add(0, 0, 0), add(1, 2, 1), add(3, 3, 2), add(0, 3, 1), add(1, 0, 2);
  for (uint64_t seed : {1, 2, 3, 4}) {
    auto sampler = Bayesian(space, seed);
    absl::StatusOr<Params> p = sampler->Ask(At(static_cast<int64_t>(history.size()), history));
    ASSERT_TRUE(p.ok()) << p.status();
    for (const Observation& o : history) EXPECT_NE(o.params, *p) << "seed " << seed;
    int differ = 0;
    for (int i = 0; i < 3; ++i) differ += ValueOf(*p, i) != ValueOf(history[0].params, i);
    EXPECT_EQ(differ, 1) << "seed " << seed;
  }
}

SearchSpace RosenbrockSpace() {
  SearchSpace space;
  for (int i = 0; i < 4; ++i) space.params.push_back(Float(absl::StrCat("x", i), -2, 2));
  return space;
}

double Rosenbrock(const Params& p) {
  double f = 0;
  for (int i = 0; i + 1 < 4; ++i) {
    const double a = std::get<double>(p.at(absl::StrCat("x", i)));
    const double b = std::get<double>(p.at(absl::StrCat("x", i + 1)));
    f += 100 * (b - a * a) * (b - a * a) + (1 - a) * (1 - a);
  }
  return f;
}

TEST(BayesianSamplerTest, FollowsRosenbrocksCurvedValleyWithinOneHundredTrials) {
  // Values span 0 to ~1e4 while the last improvements along the valley are hundredths: a
  // noise floor of 1e-6 of the standardised spread, or a warp whose knee sat inside the
  // valley, left these seeds at 0.6 to 1.9 after 100 trials (bench/hpo rosenbrock).
  for (uint64_t seed : {1, 2, 3}) {
    auto sampler = Bayesian(RosenbrockSpace(), seed);
    EXPECT_LT(Best(RunTrials(*sampler, 100, Rosenbrock)), 0.3) << "seed " << seed;
  }
}

}  // namespace
}  // namespace sextant
