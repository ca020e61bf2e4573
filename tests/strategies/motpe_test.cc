#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "strategies/internal/mo_tpe_split.h"
#include "strategies/pareto.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

using Outcome = Observation::Outcome;
using Objectives = std::function<std::vector<double>(const Params&)>;
using Constraints = std::function<std::vector<double>(const Params&)>;

SearchSpace UnitCube(int dims) {
  SearchSpace space;
  for (int d = 0; d < dims; ++d) {
    ParamSpec spec;
    spec.name = std::string("x") + std::to_string(d);
    space.params.push_back(spec);
  }
  return space;
}

double X(const Params& p, int d) {
  return std::get<double>(p.at(std::string("x") + std::to_string(d)));
}

std::vector<double> Zdt1(const Params& p) {
  const int n = static_cast<int>(p.size());
  double sum = 0;
  for (int d = 1; d < n; ++d) sum += X(p, d);
  const double f1 = X(p, 0), g = 1 + 9 * sum / (n - 1);
  return {f1, g * (1 - std::sqrt(f1 / g))};
}

SampleRequest At(int64_t n, const std::vector<Observation>& history) {
  SampleRequest request;
  request.trial_number = n;
  request.history = history;
  return request;
}

std::vector<Observation> RunTrials(Sampler& sampler, const Objectives& objectives, int trials,
                                   const Constraints& constraints = nullptr) {
  std::vector<Observation> history;
  for (int i = 0; i < trials; ++i) {
    absl::StatusOr<Params> params = sampler.Ask(At(i, history));
    EXPECT_TRUE(params.ok()) << params.status();
    if (!params.ok()) break;
    Observation o;
    o.params = *params;
    o.outcome = Outcome::kCompleted;
    o.values = objectives(o.params);
    if (constraints) o.violations = constraints(o.params);
    history.push_back(o);
  }
  return history;
}

double HypervolumeOf(const std::vector<Observation>& history, size_t trials,
                     const std::vector<double>& reference) {
  std::vector<std::vector<double>> points;
  for (size_t i = 0; i < std::min(trials, history.size()); ++i) {
    if (Feasible(history[i])) points.push_back(history[i].values);
  }
  return Hypervolume(points, reference);
}

TpeOptions Motpe(uint64_t seed, int constraints = 0) {
  TpeOptions options;
  options.seed = seed;
  options.objectives = 2;
  options.constraints = constraints;
  return options;
}

TEST(MotpeSplitTest, WholeFrontsFirstThenGreedyHypervolume) {
  // Front 0: {0, 1}. Front 1: 2..6; the greedy subset takes the point adding the most area.
  std::vector<std::vector<double>> points{{0, 1},     {1, 0},   {1, 5}, {2, 3.5},
                                          {2.5, 2.5}, {3.5, 2}, {5, 1}};
  EXPECT_EQ(internal::MotpeBelow(points, 2), (std::vector<int>{0, 1}));
  const std::vector<int> below = internal::MotpeBelow(points, 3);
  ASSERT_EQ(below.size(), 3u);
  EXPECT_EQ(below[0], 0);
  EXPECT_EQ(below[1], 1);
  EXPECT_EQ(below[2], 4);  // (2.5, 2.5): the largest box against the reference (5.5, 5.5)
  EXPECT_EQ(internal::MotpeBelow(points, 99).size(), points.size());
  EXPECT_TRUE(internal::MotpeBelow(points, 0).empty());
}

TEST(MotpeSplitTest, WeightsFollowHypervolumeContribution) {
  std::vector<std::vector<double>> below{{0, 4}, {1, 1}, {4, 0}, {2, 2}};
  const std::vector<double> w = internal::MotpeBelowWeights(below);
  ASSERT_EQ(w.size(), 4u);
  EXPECT_DOUBLE_EQ(*std::max_element(w.begin(), w.end()), 1.0);
  EXPECT_LT(w[3], 1e-9);  // dominated: contributes nothing
  EXPECT_GT(w[1], w[0]);
  EXPECT_EQ(internal::MotpeBelowWeights({{1, 2}}), std::vector<double>{1.0});
}

TEST(MotpeSplitTest, GivenReferenceReplacesTheDerivedOneWhereSet) {
  const std::vector<std::vector<double>> points{{1, 2}, {2, 1}};
  EXPECT_EQ(internal::MotpeReference(points), (std::vector<double>{2.2, 2.2}));
  EXPECT_EQ(internal::MotpeReference(points, {NAN, 1.5}), (std::vector<double>{2.2, 1.5}));
  // No point is better than (0.5, 0.5) in both objectives: it would weigh nothing.
  EXPECT_EQ(internal::MotpeReference(points, {0.5, 0.5}), (std::vector<double>{2.2, 2.2}));
}

TEST(MotpeSplitTest, GivenReferenceSteersTheGreedySubset) {
  const std::vector<std::vector<double>> points{{0, 3}, {1, 1}, {3, 0}};
  // Against the derived (3.3, 3.3), (1, 1) bounds the largest box.
  EXPECT_EQ(internal::MotpeBelow(points, 1), (std::vector<int>{1}));
  // Only f1 < 0.5 counts: (0, 3) is the one point that adds anything.
  const std::vector<double> reference{0.5, 4};
  EXPECT_EQ(internal::MotpeBelow(points, 1, reference), (std::vector<int>{0}));
  const std::vector<double> w = internal::MotpeBelowWeights({{0, 3}, {1, 1}, {3, 0}}, reference);
  EXPECT_DOUBLE_EQ(w[0], 1.0);
  EXPECT_LT(w[1], 1e-9);
  EXPECT_LT(w[2], 1e-9);
}

TEST(MotpeSamplerTest, SameSeedAndHistoryGiveSameSuggestions) {
  auto a = NewTpeSampler(UnitCube(4), Motpe(3));
  auto b = NewTpeSampler(UnitCube(4), Motpe(3));
  const auto ha = RunTrials(*a, Zdt1, 40);
  const auto hb = RunTrials(*b, Zdt1, 40);
  ASSERT_EQ(ha.size(), 40u);
  for (size_t i = 0; i < ha.size(); ++i) EXPECT_EQ(ha[i].params, hb[i].params) << i;
  EXPECT_EQ(*a->Ask(At(30, std::vector<Observation>(ha.begin(), ha.begin() + 30))), ha[30].params);
}

TEST(MotpeSamplerTest, BeatsRandomSearchOnZdt1) {
  const std::vector<double> reference{1.1, 11};
  double motpe_total = 0, random_total = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    const auto motpe = RunTrials(*NewTpeSampler(UnitCube(10), Motpe(seed)), Zdt1, 100);
    const auto random = RunTrials(*NewRandomSampler(UnitCube(10), seed), Zdt1, 100);
    const double hm = HypervolumeOf(motpe, 100, reference);
    const double hr = HypervolumeOf(random, 100, reference);
    std::printf("seed %d, 100 trials: MOTPE %.3f, random %.3f\n", static_cast<int>(seed), hm, hr);
    EXPECT_GT(hm, hr);
    motpe_total += hm;
    random_total += hr;
  }
  EXPECT_GT(motpe_total / 3, random_total / 3 + 0.3);
}

TEST(MotpeSamplerTest, InfeasiblePointsAreNotFavoured) {
  // Zdt1 is best at small x0, but only x0 >= 0.6 is feasible (40% of random points).
  const Constraints c = [](const Params& p) { return std::vector<double>{0.6 - X(p, 0)}; };
  int feasible[2] = {0, 0};  // without and with the constraint modelled
  for (int constraints : {0, 1}) {
    auto sampler = NewTpeSampler(UnitCube(4), Motpe(5, constraints));
    const auto history = RunTrials(*sampler, Zdt1, 100, c);
    for (size_t i = 50; i < history.size(); ++i) feasible[constraints] += Feasible(history[i]);
  }
  std::printf("feasible among the last 50: %d ignoring the constraint, %d modelling it\n",
              feasible[0], feasible[1]);
  EXPECT_GE(feasible[1], 30);
  EXPECT_GE(feasible[1], feasible[0] + 10);
}

}  // namespace
}  // namespace sextant
