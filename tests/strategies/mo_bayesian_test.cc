#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "strategies/internal/mo_gp_data.h"
#include "strategies/pareto.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

using Outcome = Observation::Outcome;

SearchSpace UnitSpace(int dims) {
  SearchSpace space;
  for (int d = 0; d < dims; ++d) {
    ParamSpec spec;
    spec.name = absl::StrCat("x", d);
    spec.min = 0;
    spec.max = 1;
    space.params.push_back(spec);
  }
  return space;
}

std::vector<double> Coordinates(const Params& p, int dims) {
  std::vector<double> x;
  for (int d = 0; d < dims; ++d) x.push_back(std::get<double>(p.at(absl::StrCat("x", d))));
  return x;
}

// ZDT1 (Zitzler, Deb & Thiele 2000): a convex front f2 = 1 - sqrt(f1) where x1.. = 0.
std::vector<double> Zdt1(const std::vector<double>& x) {
  double g = 0;
  for (size_t i = 1; i < x.size(); ++i) g += x[i];
  g = 1 + 9 * g / static_cast<double>(x.size() - 1);
  return {x[0], g * (1 - std::sqrt(x[0] / g))};
}

SampleRequest At(int64_t n, absl::Span<const Observation> history, double budget_used = 0) {
  SampleRequest request;
  request.trial_number = n;
  request.history = history;
  request.budget_used = budget_used;
  return request;
}

BayesianOptions MultiObjective(uint64_t seed, int objectives = 2, int constraints = 0) {
  BayesianOptions options;
  options.seed = seed;
  options.objectives = objectives;
  options.constraints = constraints;
  return options;
}

// What one trial reports.
struct Outcomes {
  std::vector<double> values;
  std::vector<double> violations;
  double cost = 0;
};

Observation Finished(Params params, const Outcomes& out) {
  Observation o;
  o.params = std::move(params);
  o.outcome = Outcome::kCompleted;
  if (out.values.size() == 1) {
    o.value = out.values[0];
  } else {
    o.values = out.values;
  }
  o.violations = out.violations;
  if (out.cost > 0) o.cost = out.cost;
  return o;
}

// Runs `trials` sequential trials of f in a space of `dims` unit floats.
std::vector<Observation> RunTrials(Sampler& sampler, int trials, int dims,
                                   const std::function<Outcomes(const std::vector<double>&)>& f,
                                   double budget_used = 0) {
  std::vector<Observation> history;
  for (int t = 0; t < trials; ++t) {
    absl::StatusOr<Params> p = sampler.Ask(At(t, history, budget_used));
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) break;
    history.push_back(Finished(*p, f(Coordinates(*p, dims))));
  }
  return history;
}

double HypervolumeOf(const std::vector<Observation>& history, std::vector<double> reference) {
  std::vector<std::vector<double>> points;
  for (const Observation& o : history) points.push_back(o.values);
  return Hypervolume(points, reference);
}

Outcomes Zdt1Outcomes(const std::vector<double>& x) { return {Zdt1(x), {}, 0}; }

TEST(MultiObjectiveBayesianTest, SameSeedAndHistoryGiveTheSameSuggestions) {
  auto a = NewBayesianSampler(UnitSpace(4), MultiObjective(3));
  const std::vector<Observation> history = RunTrials(*a, 12, 4, Zdt1Outcomes);
  auto b = NewBayesianSampler(UnitSpace(4), MultiObjective(3));
  auto c = NewBayesianSampler(UnitSpace(4), MultiObjective(3));
  absl::StatusOr<Params> pb = b->Ask(At(12, history));
  absl::StatusOr<Params> pc = c->Ask(At(12, history));
  ASSERT_TRUE(pb.ok() && pc.ok());
  EXPECT_EQ(*pb, *pc);
}

TEST(MultiObjectiveBayesianTest, BeatsRandomOnZdt1InSixtyTrials) {
  constexpr int kDims = 6;
  const std::vector<double> reference = {1.1, 11};
  auto bayes = NewBayesianSampler(UnitSpace(kDims), MultiObjective(7));
  auto random = NewRandomSampler(UnitSpace(kDims), 7);
  const double bayes_hv = HypervolumeOf(RunTrials(*bayes, 60, kDims, Zdt1Outcomes), reference);
  const double random_hv = HypervolumeOf(RunTrials(*random, 60, kDims, Zdt1Outcomes), reference);
  // The ideal front bounds 1.1·11 - 1/3 ≈ 11.77 below this reference.
  EXPECT_GT(bayes_hv, random_hv + 0.5) << "bayes " << bayes_hv << " random " << random_hv;
  EXPECT_GT(bayes_hv, 11.0);
}

// f1 = x0 and f2 = 1 - x0 + x1: every point with x1 = 0 is on the front.
Outcomes LinearFront(const std::vector<double>& x) { return {{x[0], 1 - x[0] + x[1]}, {}, 0}; }

// The x0 of the suggestions after an 8-point design, 10 of them.
std::vector<double> SuggestedX0(std::vector<double> reference) {
  BayesianOptions options = MultiObjective(29);
  options.initial_design = 8;
  options.reference = std::move(reference);
  auto sampler = NewBayesianSampler(UnitSpace(2), options);
  const std::vector<Observation> history = RunTrials(*sampler, 18, 2, LinearFront);
  std::vector<double> x0;
  for (size_t i = 8; i < history.size(); ++i) x0.push_back(history[i].values[0]);
  return x0;
}

TEST(MultiObjectiveBayesianTest, GivenReferenceKeepsTheSearchInsideIt) {
  // Only f1 < 0.3 improves the hypervolume against (0.3, 2): the search stays there.
  const std::vector<double> inside = SuggestedX0({0.3, 2});
  EXPECT_GE(std::count_if(inside.begin(), inside.end(), [](double v) { return v < 0.3; }), 9)
      << absl::StrJoin(inside, ", ");
  // Derived from the observations, the reference lets the whole front count.
  const std::vector<double> derived = SuggestedX0({});
  EXPECT_GE(std::count_if(derived.begin(), derived.end(), [](double v) { return v > 0.4; }), 3)
      << absl::StrJoin(derived, ", ");
  // NaN entries are derived too.
  EXPECT_EQ(SuggestedX0({NAN, NAN}), derived);
}

TEST(MultiObjectiveModelDataTest, WarpedValueFollowsTheWarpBetweenAndBeyondObservations) {
  const Eigen::VectorXd raw = (Eigen::VectorXd(4) << 3, 1, 2, 5).finished();
  const Eigen::VectorXd warped = (Eigen::VectorXd(4) << 0.5, -1, 0, 1).finished();
  EXPECT_DOUBLE_EQ(internal::WarpedValue(raw, warped, 2), 0);     // at an observation
  EXPECT_DOUBLE_EQ(internal::WarpedValue(raw, warped, 4), 0.75);  // between 3 and 5
  EXPECT_DOUBLE_EQ(internal::WarpedValue(raw, warped, 7), 1.5);   // along 3..5 beyond 5
  EXPECT_DOUBLE_EQ(internal::WarpedValue(raw, warped, 0), -2);    // along 1..2 below 1
  const Eigen::VectorXd same = Eigen::VectorXd::Constant(3, 2.0);
  EXPECT_DOUBLE_EQ(internal::WarpedValue(same, Eigen::VectorXd::Zero(3), 3.5), 1.5);
}

TEST(MultiObjectiveBayesianTest, PendingTrialsGetDistinctSpreadOutSuggestions) {
  constexpr int kDims = 3;
  auto sampler = NewBayesianSampler(UnitSpace(kDims), MultiObjective(11));
  std::vector<Observation> history = RunTrials(*sampler, 15, kDims, Zdt1Outcomes);
  std::vector<std::vector<double>> batch;
  for (int b = 0; b < 5; ++b) {
    absl::StatusOr<Params> p = sampler->Ask(At(15 + b, history));
    ASSERT_TRUE(p.ok()) << p.status();
    batch.push_back(Coordinates(*p, kDims));
    Observation pending;
    pending.params = *p;
    pending.outcome = Outcome::kPending;
    history.push_back(pending);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      double d2 = 0;
      for (int d = 0; d < kDims; ++d)
        d2 += (batch[i][d] - batch[j][d]) * (batch[i][d] - batch[j][d]);
      EXPECT_GT(std::sqrt(d2), 1e-3) << i << " and " << j;
    }
  }
}

TEST(MultiObjectiveBayesianTest, FailedTrialsAndThreeObjectivesStillAnswer) {
  constexpr int kDims = 3;
  auto sampler = NewBayesianSampler(UnitSpace(kDims), MultiObjective(5, 3));
  std::vector<Observation> history;
  for (int t = 0; t < 16; ++t) {
    absl::StatusOr<Params> p = sampler->Ask(At(t, history));
    ASSERT_TRUE(p.ok()) << p.status();
    const std::vector<double> x = Coordinates(*p, kDims);
    if (t % 4 == 3) {
      Observation failed;
      failed.params = *p;
      failed.outcome = Outcome::kFailed;
      history.push_back(failed);
      continue;
    }
    history.push_back(Finished(*p, {{x[0], x[1], 2 - x[0] - x[1] + x[2]}, {}, 0}));
  }
}

// Minimise (x0 - 0.3)² + (x1 - 0.4)² and, for two objectives, also (x0 - 0.1)² + (x1 - 0.9)²,
// subject to x0 + 0.6·x1 <= 0.65 (about half of the square is feasible).
Outcomes HalfFeasible(const std::vector<double>& x, int objectives) {
  Outcomes out;
  out.values.push_back((x[0] - 0.3) * (x[0] - 0.3) + (x[1] - 0.4) * (x[1] - 0.4) + 0.2 * x[1]);
  if (objectives == 2)
    out.values.push_back((x[0] - 0.1) * (x[0] - 0.1) + (x[1] - 0.9) * (x[1] - 0.9));
  out.violations.push_back(x[0] + 0.6 * x[1] - 0.65);
  return out;
}

double FeasibleShareAfter(const std::vector<Observation>& history, size_t from) {
  int feasible = 0;
  for (size_t i = from; i < history.size(); ++i) feasible += Feasible(history[i]) ? 1 : 0;
  return static_cast<double>(feasible) / static_cast<double>(history.size() - from);
}

TEST(ConstrainedBayesianTest, MostSuggestionsAfterTheDesignAreFeasible) {
  for (int objectives : {1, 2}) {
    auto sampler = NewBayesianSampler(UnitSpace(2), MultiObjective(13, objectives, 1));
    const std::vector<Observation> history = RunTrials(
        *sampler, 30, 2, [objectives](const auto& x) { return HalfFeasible(x, objectives); });
    EXPECT_GE(FeasibleShareAfter(history, 5), 0.75) << objectives << " objectives";
  }
}

TEST(ConstrainedBayesianTest, MissingViolationsCountAsInfeasibleAndTheSearchGoesOn) {
  auto sampler = NewBayesianSampler(UnitSpace(2), MultiObjective(17, 1, 1));
  std::vector<Observation> history;
  for (int t = 0; t < 12; ++t) {
    absl::StatusOr<Params> p = sampler->Ask(At(t, history));
    ASSERT_TRUE(p.ok()) << p.status();
    Outcomes out = HalfFeasible(Coordinates(*p, 2), 1);
    // Nothing is feasible at first; then the metric goes missing on every other trial.
    out.violations[0] =
        t < 6 ? std::abs(out.violations[0]) + 0.1
              : (t % 2 == 0 ? std::numeric_limits<double>::infinity() : out.violations[0]);
    history.push_back(Finished(*p, out));
  }
}

// 2-D: equally good minima at x0 = 0, 1/3, 2/3 and 1, while a trial costs 10^x0 dollars
// (10x across the space).
Outcomes Periodic(const std::vector<double>& x) {
  const double s = std::sin(3 * std::numbers::pi * x[0]);
  return {{s * s + 0.1 * (x[1] - 0.5) * (x[1] - 0.5)}, {}, std::pow(10.0, x[0])};
}

// The mean log10 dollars of the 12 suggestions after the 5-point design.
double EarlyLogCost(const BayesianOptions& options) {
  auto sampler = NewBayesianSampler(UnitSpace(2), options);
  const std::vector<Observation> history = RunTrials(*sampler, 17, 2, Periodic, 0.0);
  double sum = 0;
  for (size_t i = 5; i < history.size(); ++i) sum += std::log10(*history[i].cost);
  return sum / 12;
}

TEST(CostAwareBayesianTest, EarlySuggestionsFavourCheapRegions) {
  for (uint64_t seed : {1, 2, 3}) {
    BayesianOptions plain;
    plain.seed = seed;
    BayesianOptions cost_aware = plain;
    cost_aware.cost_aware = true;
    const double aware = EarlyLogCost(cost_aware);
    const double unaware = EarlyLogCost(plain);
    EXPECT_LT(aware, unaware - 0.05) << "seed " << seed;
  }
}

TEST(CostAwareBayesianTest, DesignContinuesWithCheapSobolPoints) {
  // The 5-point design is followed by 5 more, each the cheapest of a block of Sobol points.
  for (uint64_t seed : {1, 2, 3}) {
    BayesianOptions options;
    options.seed = seed;
    options.cost_aware = true;
    auto sampler = NewBayesianSampler(UnitSpace(2), options);
    auto sobol = NewSobolSampler(UnitSpace(2), seed);
    const std::vector<Observation> history = RunTrials(*sampler, 10, 2, Periodic, 0.0);
    const std::vector<Observation> plain = RunTrials(*sobol, 10, 2, Periodic, 0.0);
    double cheap = 0, spread = 0;
    for (size_t i = 5; i < 10; ++i) {
      EXPECT_LT(Coordinates(history[i].params, 2)[0], 0.5) << "seed " << seed << " trial " << i;
      cheap += *history[i].cost;
      spread += *plain[i].cost;
    }
    EXPECT_LT(cheap, 0.6 * spread) << "seed " << seed;
  }
}

TEST(CostAwareBayesianTest, WithTheBudgetSpentItChoosesWhatPlainEiChooses) {
  BayesianOptions plain;
  // Not 23: since the GP's noise floor and tail-log warp changed (bench/hpo), that seed's
  // cost-aware suggestion at budget_used 0 is the same corner, (0, 1), as plain EI's; it is
  // the only one of seeds 20..29 where the cost changes nothing.
  plain.seed = 24;
  auto runner = NewBayesianSampler(UnitSpace(2), plain);
  const std::vector<Observation> history = RunTrials(*runner, 12, 2, Periodic);
  BayesianOptions cost_aware = plain;
  cost_aware.cost_aware = true;
  auto a = NewBayesianSampler(UnitSpace(2), cost_aware);
  auto b = NewBayesianSampler(UnitSpace(2), plain);
  absl::StatusOr<Params> pa = a->Ask(At(12, history, 1.0));
  absl::StatusOr<Params> pb = b->Ask(At(12, history, 1.0));
  ASSERT_TRUE(pa.ok() && pb.ok());
  EXPECT_EQ(*pa, *pb);
  // Halfway through the budget the cost still counts.
  auto c = NewBayesianSampler(UnitSpace(2), cost_aware);
  absl::StatusOr<Params> pc = c->Ask(At(12, history, 0.0));
  ASSERT_TRUE(pc.ok());
  EXPECT_NE(*pc, *pb);
}

TEST(CostAwareBayesianTest, CostCountsInFullRightAfterTheDesign) {
  // CArBO cools the cost's exponent from 1 after the design, not from 1 at the first trial:
  // right after the 10-trial design (5 Sobol points, 5 cheap ones) the suggestion is the same
  // whether the design used 20% of the budget or none of it.
  for (uint64_t seed : {1, 2, 3}) {
    BayesianOptions cost_aware;
    cost_aware.seed = seed;
    cost_aware.cost_aware = true;
    auto runner = NewBayesianSampler(UnitSpace(2), cost_aware);
    const std::vector<Observation> history = RunTrials(*runner, 10, 2, Periodic, 0.0);
    auto a = NewBayesianSampler(UnitSpace(2), cost_aware);
    auto b = NewBayesianSampler(UnitSpace(2), cost_aware);
    absl::StatusOr<Params> pa = a->Ask(At(10, history, 0.2));
    absl::StatusOr<Params> pb = b->Ask(At(10, history, 0.0));
    ASSERT_TRUE(pa.ok() && pb.ok());
    EXPECT_EQ(*pa, *pb) << "seed " << seed;
  }
}

TEST(CostAwareBayesianTest, CostExponentCoolsOverTheBudgetLeftAfterTheDesign) {
  // A sampler that saw the design end at half the budget weighs the cost at 75% used as one
  // that saw it end at none weighs it at 50% used: (1 - 0.75) / (1 - 0.5) = 1 - 0.5.
  for (uint64_t seed : {5, 6, 7}) {
    BayesianOptions cost_aware;
    cost_aware.seed = seed;
    cost_aware.cost_aware = true;
    auto runner = NewBayesianSampler(UnitSpace(2), cost_aware);
    const std::vector<Observation> history = RunTrials(*runner, 14, 2, Periodic, 0.0);
    const absl::Span<const Observation> design(history.data(), 10);
    auto a = NewBayesianSampler(UnitSpace(2), cost_aware);
    auto b = NewBayesianSampler(UnitSpace(2), cost_aware);
    ASSERT_TRUE(a->Ask(At(10, design, 0.5)).ok());
    ASSERT_TRUE(b->Ask(At(10, design, 0.0)).ok());
    absl::StatusOr<Params> pa = a->Ask(At(14, history, 0.75));
    absl::StatusOr<Params> pb = b->Ask(At(14, history, 0.5));
    ASSERT_TRUE(pa.ok() && pb.ok());
    EXPECT_EQ(*pa, *pb) << "seed " << seed;
  }
}

}  // namespace
}  // namespace sextant
