#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numbers>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "strategies/internal/parzen_estimator.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

using Outcome = Observation::Outcome;
// An objective: a value, or nullopt for a failed trial.
using Objective = std::function<std::optional<double>(const Params&)>;

ParamSpec FloatParam(const std::string& name, double min, double max, bool log = false) {
  ParamSpec spec;
  spec.name = name;
  spec.kind = ParamSpec::Kind::kFloat;
  spec.min = min;
  spec.max = max;
  spec.log = log;
  return spec;
}

ParamSpec IntParam(const std::string& name, double min, double max, bool log = false) {
  ParamSpec spec = FloatParam(name, min, max, log);
  spec.kind = ParamSpec::Kind::kInt;
  return spec;
}

ParamSpec CategoricalParam(const std::string& name, std::vector<std::string> values) {
  ParamSpec spec;
  spec.name = name;
  spec.kind = ParamSpec::Kind::kCategorical;
  spec.values = std::move(values);
  return spec;
}

SampleRequest At(int64_t n, const std::vector<Observation>& history) {
  SampleRequest request;
  request.trial_number = n;
  request.history = history;
  return request;
}

TpeOptions Options(uint64_t seed, bool multivariate) {
  TpeOptions options;
  options.seed = seed;
  options.multivariate = multivariate;
  return options;
}

// Runs trials sequentially, each asked with every earlier result, and returns the history.
std::vector<Observation> RunTrials(Sampler& sampler, const Objective& objective, int trials) {
  std::vector<Observation> history;
  for (int i = 0; i < trials; ++i) {
    absl::StatusOr<Params> params = sampler.Ask(At(i, history));
    EXPECT_TRUE(params.ok()) << params.status();
    if (!params.ok()) break;
    Observation o;
    o.params = *params;
    o.value = objective(*params);
    o.outcome = o.value.has_value() ? Outcome::kCompleted : Outcome::kFailed;
    history.push_back(o);
  }
  return history;
}

double Best(const std::vector<Observation>& history) {
  double best = INFINITY;
  for (const Observation& o : history) {
    if (o.value.has_value()) best = std::min(best, *o.value);
  }
  return best;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double X(const Params& p, const std::string& name = "x") { return std::get<double>(p.at(name)); }

SearchSpace OneFloat(double min, double max) {
  SearchSpace space;
  space.params.push_back(FloatParam("x", min, max));
  return space;
}

double Branin(const Params& p) {
  const double x1 = X(p, "x1");
  const double x2 = X(p, "x2");
  const double pi = std::numbers::pi;
  const double b = 5.1 / (4 * pi * pi);
  const double t = x2 - b * x1 * x1 + 5 / pi * x1 - 6;
  return t * t + 10 * (1 - 1 / (8 * pi)) * std::cos(x1) + 10;
}

class TpeSamplerTest : public ::testing::TestWithParam<bool> {
 protected:
  bool multivariate() const { return GetParam(); }
};

TEST_P(TpeSamplerTest, SameSeedAndHistoryGiveSameSuggestions) {
  const Objective f = [](const Params& p) { return std::pow(X(p) - 3, 2); };
  auto a = NewTpeSampler(OneFloat(-10, 10), Options(7, multivariate()));
  auto b = NewTpeSampler(OneFloat(-10, 10), Options(7, multivariate()));
  auto c = NewTpeSampler(OneFloat(-10, 10), Options(8, multivariate()));
  const auto ha = RunTrials(*a, f, 30);
  const auto hb = RunTrials(*b, f, 30);
  const auto hc = RunTrials(*c, f, 30);
  ASSERT_EQ(ha.size(), 30u);
  int differ = 0;
  for (size_t i = 0; i < ha.size(); ++i) {
    EXPECT_EQ(ha[i].params, hb[i].params) << "trial " << i;
    differ += ha[i].params != hc[i].params;
  }
  EXPECT_GT(differ, 20);
  // Asking again with the same history repeats the answer: no state carries over.
  EXPECT_EQ(*a->Ask(At(12, std::vector<Observation>(ha.begin(), ha.begin() + 12))), ha[12].params);
}

TEST_P(TpeSamplerTest, StartupTrialsAreTheSobolPoints) {
  SearchSpace space;
  space.params.push_back(FloatParam("x1", -5, 10));
  space.params.push_back(FloatParam("x2", 0, 15));
  auto tpe = NewTpeSampler(space, Options(3, multivariate()));
  auto sobol = NewSobolSampler(space, 3);
  const auto history = RunTrials(*tpe, Branin, 12);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(history[i].params, *sobol->Ask(At(i, {}))) << "trial " << i;
  }
  EXPECT_NE(history[10].params, *sobol->Ask(At(10, {})));
}

TEST_P(TpeSamplerTest, SuggestionsRespectBoundsForEveryKind) {
  SearchSpace space;
  space.params.push_back(FloatParam("f", -2, 3));
  space.params.push_back(FloatParam("lf", 1e-5, 1e-1, /*log=*/true));
  space.params.push_back(IntParam("i", -3, 4));
  space.params.push_back(IntParam("li", 1, 1000, /*log=*/true));
  space.params.push_back(CategoricalParam("c", {"a", "b", "c"}));
  const Objective f = [](const Params& p) {
    return std::pow(X(p, "f") - 3, 2) + std::log(X(p, "lf")) +
           std::abs(std::get<int64_t>(p.at("i")) + 3) +
           std::log(static_cast<double>(std::get<int64_t>(p.at("li")))) +
           (std::get<std::string>(p.at("c")) == "b" ? 0 : 1);
  };
  auto sampler = NewTpeSampler(space, Options(1, multivariate()));
  const auto history = RunTrials(*sampler, f, 60);
  ASSERT_EQ(history.size(), 60u);
  for (const Observation& o : history) {
    ASSERT_EQ(o.params.size(), 5u);
    EXPECT_GE(X(o.params, "f"), -2);
    EXPECT_LE(X(o.params, "f"), 3);
    EXPECT_GE(X(o.params, "lf"), 1e-5);
    EXPECT_LE(X(o.params, "lf"), 1e-1);
    const int64_t i = std::get<int64_t>(o.params.at("i"));
    EXPECT_GE(i, -3);
    EXPECT_LE(i, 4);
    const int64_t li = std::get<int64_t>(o.params.at("li"));
    EXPECT_GE(li, 1);
    EXPECT_LE(li, 1000);
    EXPECT_TRUE(
        std::set<std::string>({"a", "b", "c"}).contains(std::get<std::string>(o.params.at("c"))));
  }
}

TEST_P(TpeSamplerTest, LearnsTheBestCategory) {
  SearchSpace space = OneFloat(0, 1);
  space.params.push_back(CategoricalParam("c", {"a", "b", "c", "d"}));
  const Objective f = [](const Params& p) {
    return (std::get<std::string>(p.at("c")) == "b" ? 0 : 1) + 0.1 * X(p);
  };
  auto sampler = NewTpeSampler(space, Options(0, multivariate()));
  const auto history = RunTrials(*sampler, f, 60);
  int b = 0;
  for (size_t i = 40; i < history.size(); ++i) {
    b += std::get<std::string>(history[i].params.at("c")) == "b";
  }
  EXPECT_GE(b, 12);  // uniform draws would give 5
}

TEST_P(TpeSamplerTest, InactiveConditionalParametersAreOmitted) {
  SearchSpace space;
  space.params.push_back(CategoricalParam("model", {"linear", "tree"}));
  ParamSpec lr = FloatParam("lr", 1e-4, 1, /*log=*/true);
  lr.when = {{"model", "linear"}};
  ParamSpec depth = IntParam("depth", 1, 12);
  depth.when = {{"model", "tree"}};
  ParamSpec kernel = CategoricalParam("kernel", {"rbf", "poly"});
  kernel.when = {{"model", "linear"}};
  ParamSpec degree = IntParam("degree", 2, 5);
  degree.when = {{"kernel", "poly"}};  // active only through an active parent
  // Declared before its parent, so sampling has to follow the conditions, not the order.
  space.params.insert(space.params.begin(), degree);
  space.params.push_back(lr);
  space.params.push_back(depth);
  space.params.push_back(kernel);
  const Objective f = [](const Params& p) {
    if (std::get<std::string>(p.at("model")) == "tree") {
      return std::abs(std::get<int64_t>(p.at("depth")) - 5.0) / 10;
    }
    double v = std::abs(std::log10(X(p, "lr")) + 2);
    if (p.contains("degree")) v += std::get<int64_t>(p.at("degree")) * 0.1;
    return v;
  };
  auto sampler = NewTpeSampler(space, Options(5, multivariate()));
  const auto history = RunTrials(*sampler, f, 60);
  ASSERT_EQ(history.size(), 60u);
  std::set<std::string> models;
  for (const Observation& o : history) {
    const Params& p = o.params;
    const std::string model = std::get<std::string>(p.at("model"));
    models.insert(model);
    EXPECT_EQ(p.contains("lr"), model == "linear");
    EXPECT_EQ(p.contains("kernel"), model == "linear");
    EXPECT_EQ(p.contains("depth"), model == "tree");
    const bool poly = p.contains("kernel") && std::get<std::string>(p.at("kernel")) == "poly";
    EXPECT_EQ(p.contains("degree"), poly);
    for (const auto& [name, value] : p) EXPECT_TRUE(IsActive(space.params[space.IndexOf(name)], p));
  }
  EXPECT_EQ(models.size(), 2u);
}

TEST_P(TpeSamplerTest, ConcentratesNearTheOptimumOfAQuadratic) {
  const Objective f = [](const Params& p) { return std::pow(X(p) - 3, 2); };
  auto sampler = NewTpeSampler(OneFloat(-10, 10), Options(11, multivariate()));
  const auto history = RunTrials(*sampler, f, 60);
  std::vector<double> distance;
  for (size_t i = 40; i < history.size(); ++i)
    distance.push_back(std::abs(X(history[i].params) - 3));
  // Uniform draws on [-10, 10] have a median distance of 5 from x = 3; Optuna's TPE gets
  // about 1.1 (univariate) and 1.5 (multivariate) here.
  EXPECT_LT(Median(distance), 2.5);
}

TEST_P(TpeSamplerTest, BeatsRandomSearchOnBranin) {
  SearchSpace space;
  space.params.push_back(FloatParam("x1", -5, 10));
  space.params.push_back(FloatParam("x2", 0, 15));
  std::vector<double> tpe_best, random_best;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    auto tpe = NewTpeSampler(space, Options(seed, multivariate()));
    auto random = NewRandomSampler(space, seed);
    tpe_best.push_back(Best(RunTrials(*tpe, Branin, 60)));
    random_best.push_back(Best(RunTrials(*random, Branin, 60)));
  }
  EXPECT_LT(Median(tpe_best), Median(random_best));
  EXPECT_LT(Median(tpe_best), 0.397887 + 0.5);  // the global minimum is 0.397887
}

// Eight suggestions asked while the earlier ones still run: with the running trials in the
// history (as pending) they should spread out, rather than pile up on the current best.
double BatchSpread(bool tell_pending, bool multivariate, uint64_t seed) {
  const Objective f = [](const Params& p) { return std::pow(X(p) - 0.5, 2); };
  auto sampler = NewTpeSampler(OneFloat(0, 1), Options(seed, multivariate));
  std::vector<Observation> history = RunTrials(*sampler, f, 20);
  const size_t finished = history.size();
  std::vector<double> batch;
  for (int i = 0; i < 8; ++i) {
    const int64_t trial = static_cast<int64_t>(finished) + i;
    std::vector<Observation> visible = history;
    if (!tell_pending) visible.resize(finished);
    const Params p = *sampler->Ask(At(trial, visible));
    batch.push_back(X(p));
    Observation pending;
    pending.params = p;
    pending.outcome = Outcome::kPending;
    history.push_back(pending);
  }
  EXPECT_EQ(std::set<double>(batch.begin(), batch.end()).size(), batch.size());
  double spread = 0;
  for (double a : batch) {
    for (double b : batch) spread += std::abs(a - b);
  }
  return spread;
}

TEST_P(TpeSamplerTest, PendingTrialsSpreadConcurrentSuggestions) {
  double with_pending = 0;
  double without = 0;
  for (uint64_t seed = 0; seed < 5; ++seed) {
    with_pending += BatchSpread(true, multivariate(), seed);
    without += BatchSpread(false, multivariate(), seed);
  }
  EXPECT_GT(with_pending, without);
}

TEST_P(TpeSamplerTest, ConstantObjectiveStillGivesValidSuggestions) {
  SearchSpace space = OneFloat(-1, 1);
  space.params.push_back(IntParam("n", 0, 3));
  auto sampler = NewTpeSampler(space, Options(2, multivariate()));
  const auto history = RunTrials(
      *sampler, [](const Params&) { return 1.0; }, 40);
  ASSERT_EQ(history.size(), 40u);
  for (const Observation& o : history) {
    EXPECT_GE(X(o.params), -1);
    EXPECT_LE(X(o.params), 1);
  }
}

TEST_P(TpeSamplerTest, FailedTrialsCountAsBad) {
  // Everything below 0.5 fails; the rest is flat, so only the failures tell regions apart.
  const Objective f = [](const Params& p) -> std::optional<double> {
    if (X(p) < 0.5) return std::nullopt;
    return 1.0;
  };
  auto sampler = NewTpeSampler(OneFloat(0, 1), Options(4, multivariate()));
  const auto history = RunTrials(*sampler, f, 60);
  int failed = 0;
  for (size_t i = 40; i < history.size(); ++i) failed += X(history[i].params) < 0.5;
  EXPECT_LE(failed, 5);
}

TEST_P(TpeSamplerTest, OnlyFailedOrPendingHistoryFallsBackToStartupPoints) {
  auto sampler = NewTpeSampler(OneFloat(0, 1), Options(6, multivariate()));
  std::vector<Observation> history(15);
  for (size_t i = 0; i < history.size(); ++i) {
    history[i].params = {{"x", 0.1 * static_cast<double>(i % 10)}};
    history[i].outcome = i % 2 == 0 ? Outcome::kFailed : Outcome::kPending;
  }
  auto sobol = NewSobolSampler(OneFloat(0, 1), 6);
  EXPECT_EQ(*sampler->Ask(At(15, history)), *sobol->Ask(At(15, {})));
}

TEST_P(TpeSamplerTest, IgnoresHistoryValuesOfTheWrongType) {
  SearchSpace space = OneFloat(0, 1);
  space.params.push_back(CategoricalParam("c", {"a", "b"}));
  std::vector<Observation> history;
  for (int i = 0; i < 20; ++i) {
    Observation o;
    o.params = {{"x", i % 3 == 0 ? ParamValue(std::string("oops")) : ParamValue(0.05 * i)},
                {"c", i % 4 == 0 ? ParamValue(int64_t{1}) : ParamValue(std::string("zzz"))}};
    o.outcome = Outcome::kCompleted;
    o.value = i;
    history.push_back(o);
  }
  auto sampler = NewTpeSampler(space, Options(9, multivariate()));
  const absl::StatusOr<Params> p = sampler->Ask(At(20, history));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_GE(X(*p), 0);
  EXPECT_LE(X(*p), 1);
}

TEST_P(TpeSamplerTest, RejectsNegativeTrialNumbers) {
  auto sampler = NewTpeSampler(OneFloat(0, 1), Options(0, multivariate()));
  EXPECT_FALSE(sampler->Ask(At(-1, {})).ok());
}

// Scores of one-parameter estimators over 30 observations (so the ramp of old weights applies)
// as Optuna 3.1's _ParzenEstimator computes them (consider_prior, prior_weight 1, magic clip,
// no endpoints, default_weights), for floats, ints and categoricals.
TEST(ParzenEstimatorTest, MatchesOptunaScoresForOneParameter) {
  const int n = 30;
  struct Case {
    ParamSpec spec;
    std::vector<ParamValue> observed;
    std::vector<ParamValue> points;
    std::vector<double> optuna;
  };
  std::vector<Case> cases(3);
  cases[0].spec = FloatParam("f", 0, 1);
  cases[1].spec = IntParam("i", 0, 40);
  cases[2].spec = CategoricalParam("c", {"a", "b", "c"});
  for (int i = 0; i < n; ++i) {
    cases[0].observed.emplace_back(std::in_place_type<double>,
                                   std::fmod(0.6180339887 * i + 0.1, 1.0));
    cases[1].observed.emplace_back(std::in_place_type<int64_t>, (7 * i + 3) % 41);
    cases[2].observed.emplace_back(std::in_place_type<std::string>, 1, 'a' + i % 3);
  }
  cases[0].points = {0.0, 0.05, 0.33, 0.5, 0.77, 1.0};
  cases[0].optuna = {-2.9215203024143728, -2.6354915216016086, -2.5764868116989526,
                     -2.6911438865736574, -2.53386434190028,   -2.7638598599202115};
  cases[1].points = {int64_t{0}, int64_t{3}, int64_t{10}, int64_t{40}};
  cases[1].optuna = {-3.669174409390355, -3.82471078849976, -3.9505012490745126,
                     -3.440238780421435};
  cases[2].points = {std::string("a"), std::string("b"), std::string("c")};
  cases[2].optuna = {-1.1379187540831597, -1.0909330518226263, -1.0682429497386945};
  for (const Case& c : cases) {
    auto encode = [&](const std::vector<ParamValue>& values) {
      Eigen::MatrixXd m(static_cast<Eigen::Index>(values.size()), 1);
      for (size_t i = 0; i < values.size(); ++i) {
        m(static_cast<Eigen::Index>(i), 0) = *internal::EncodeForParzen(c.spec, values[i]);
      }
      return m;
    };
    const internal::ParzenEstimator estimator({&c.spec}, encode(c.observed));
    const Eigen::VectorXd scores = estimator.LogPdf(encode(c.points));
    for (size_t i = 0; i < c.points.size(); ++i) {
      EXPECT_NEAR(scores[static_cast<Eigen::Index>(i)], c.optuna[i], 1e-9)
          << c.spec.name << " point " << i;
    }
  }
}

TEST(ParzenEstimatorTest, ObservationWeightsRampUpForOldObservations) {
  EXPECT_EQ(internal::ParzenObservationWeights(3), std::vector<double>(3, 1.0));
  const std::vector<double> w = internal::ParzenObservationWeights(30);
  ASSERT_EQ(w.size(), 30u);
  EXPECT_DOUBLE_EQ(w[0], 1.0 / 30);
  EXPECT_DOUBLE_EQ(w[4], 1.0);                        // the ramp ends at 1 ...
  for (int i = 5; i < 30; ++i) EXPECT_EQ(w[i], 1.0);  // ... where the newest 25 begin
}

INSTANTIATE_TEST_SUITE_P(Modes, TpeSamplerTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Multivariate" : "Univariate";
                         });

}  // namespace
}  // namespace sextant
