// Parameters with a step (`step:` in the experiment file): every sampler's values lie on
// min + k*step and never above max, and CheckParams refuses values off that grid.
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"
#include "tests/strategies/sampler_test_util.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

ParamSpec Stepped(std::string name, ParamSpec::Kind kind, double min, double max, double step) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.kind = kind;
  spec.min = min;
  spec.max = max;
  spec.step = step;
  return spec;
}

// Optuna's n_layers = suggest_int(1, 8, step=2): 1, 3, 5, 7 (8 is max but not on the grid).
ParamSpec Layers() { return Stepped("n_layers", ParamSpec::Kind::kInt, 1, 8, 2); }
// A decimal float grid whose sums are not exact in binary: 0.1, 0.2, ..., 0.5.
ParamSpec Dropout() { return Stepped("dropout", ParamSpec::Kind::kFloat, 0.1, 0.5, 0.1); }

SearchSpace SteppedSpace() {
  SearchSpace space;
  space.params = {Layers(), Dropout()};
  return space;
}

// True when x is one of the decimal grid's values exactly as typed (0.3, not 0.30000000000000004).
bool OnDropoutGrid(double x) {
  for (double v : {0.1, 0.2, 0.3, 0.4, 0.5}) {
    if (x == v) return true;
  }
  return false;
}

TEST(SteppedParamsTest, IntFromUnitGivesOnlyValuesOnTheStep) {
  std::set<int64_t> seen;
  for (int i = 0; i <= 1000; ++i) seen.insert(std::get<int64_t>(FromUnit(Layers(), i / 1000.0)));
  EXPECT_THAT(seen, ElementsAre(1, 3, 5, 7));
}

TEST(SteppedParamsTest, IntLevelsHaveEqualMass) {
  EXPECT_EQ(std::get<int64_t>(FromUnit(Layers(), 0.24)), 1);
  EXPECT_EQ(std::get<int64_t>(FromUnit(Layers(), 0.26)), 3);
  EXPECT_EQ(std::get<int64_t>(FromUnit(Layers(), 0.74)), 5);
  EXPECT_EQ(std::get<int64_t>(FromUnit(Layers(), 0.76)), 7);
}

TEST(SteppedParamsTest, FloatFromUnitGivesTheDecimalGridAsTyped) {
  std::set<double> seen;
  for (int i = 0; i <= 1000; ++i) seen.insert(std::get<double>(FromUnit(Dropout(), i / 1000.0)));
  EXPECT_THAT(seen, ElementsAre(0.1, 0.2, 0.3, 0.4, 0.5));
}

TEST(SteppedParamsTest, FloatStepNotDividingTheRangeStopsBelowMax) {
  const ParamSpec spec = Stepped("x", ParamSpec::Kind::kFloat, 0, 1, 0.3);
  std::set<double> seen;
  for (int i = 0; i <= 100; ++i) seen.insert(std::get<double>(FromUnit(spec, i / 100.0)));
  EXPECT_THAT(seen, ElementsAre(0, 0.3, 0.6, 0.9));
}

TEST(SteppedParamsTest, ToUnitInvertsFromUnitOnEveryLevel) {
  for (int64_t k : {1, 3, 5, 7}) {
    EXPECT_EQ(std::get<int64_t>(FromUnit(Layers(), ToUnit(Layers(), k))), k);
  }
  for (double x : {0.1, 0.2, 0.3, 0.4, 0.5}) {
    EXPECT_EQ(std::get<double>(FromUnit(Dropout(), ToUnit(Dropout(), x))), x);
  }
}

TEST(SteppedParamsTest, CheckParamsRefusesValuesOffTheGrid) {
  const SearchSpace space = SteppedSpace();
  EXPECT_THAT(CheckParams(space, {{"n_layers", int64_t{3}}, {"dropout", 0.3}}), IsEmpty());
  EXPECT_THAT(CheckParams(space, {{"n_layers", int64_t{3}}, {"dropout", 0.1 + 0.2}}), IsEmpty())
      << "within rounding of a level counts as on it";
  const std::vector<ParamProblem> problems =
      CheckParams(space, {{"n_layers", int64_t{4}}, {"dropout", 0.25}});
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].message, "n_layers: 4 is not on the grid 1 + k * 2 (nearest: 3, 5)");
  EXPECT_EQ(problems[1].message,
            "dropout: 0.25 is not on the grid 0.1 + k * 0.1 (nearest: 0.2, 0.3)");
  EXPECT_EQ(problems[0].kind, ParamProblem::Kind::kOutside);
}

TEST(SteppedParamsTest, IntStepOfOneIsNoStep) {
  ParamSpec spec = Stepped("k", ParamSpec::Kind::kInt, 1, 100, 1);
  spec.log = true;
  ParamSpec plain = spec;
  plain.step = 0;
  for (double u : {0.0, 0.1, 0.5, 0.9, 0.999}) {
    EXPECT_EQ(FromUnit(spec, u), FromUnit(plain, u)) << "u=" << u;
  }
}

// Every sampler, asked for many trials with history, proposes only grid values.
struct NamedSampler {
  std::string name;
  std::function<std::unique_ptr<Sampler>(SearchSpace)> make;
  int objectives = 1;
};

std::vector<NamedSampler> AllSamplers() {
  return {
      {"random", [](SearchSpace s) { return NewRandomSampler(std::move(s), 7); }},
      {"sobol", [](SearchSpace s) { return NewSobolSampler(std::move(s), 7); }},
      {"grid", [](SearchSpace s) { return NewGridSampler(std::move(s)); }},
      {"bayesian",
       [](SearchSpace s) {
         BayesianOptions o;
         o.seed = 7;
         o.initial_design = 4;
         return NewBayesianSampler(std::move(s), o);
       }},
      {"tpe",
       [](SearchSpace s) {
         TpeOptions o;
         o.seed = 7;
         o.startup_trials = 4;
         return NewTpeSampler(std::move(s), o);
       }},
      {"nsga2",
       [](SearchSpace s) {
         Nsga2Options o;
         o.seed = 7;
         o.population_size = 4;
         return NewNsga2Sampler(std::move(s), o);
       },
       2},
  };
}

TEST(SteppedParamsTest, EverySamplerProposesOnlyGridValues) {
  for (const NamedSampler& named : AllSamplers()) {
    std::unique_ptr<Sampler> sampler = named.make(SteppedSpace());
    std::vector<Observation> history;
    std::set<int64_t> layers;
    for (int n = 0; n < 20; ++n) {
      absl::StatusOr<Params> p = sampler->Ask(testing::At(n, history));
      if (named.name == "grid" && !p.ok()) break;  // 4 x 5 points
      ASSERT_TRUE(p.ok()) << named.name << ": " << p.status();
      const int64_t k = std::get<int64_t>(p->at("n_layers"));
      const double x = std::get<double>(p->at("dropout"));
      EXPECT_TRUE(k == 1 || k == 3 || k == 5 || k == 7) << named.name << " n_layers=" << k;
      EXPECT_TRUE(OnDropoutGrid(x)) << named.name << " dropout=" << x;
      EXPECT_THAT(CheckParams(SteppedSpace(), *p), IsEmpty()) << named.name;
      layers.insert(k);
      Observation o;
      o.params = *p;
      o.outcome = Observation::Outcome::kCompleted;
      const double loss = std::abs(static_cast<double>(k) - 5) + x;
      o.value = loss;
      if (named.objectives > 1) o.values = {loss, static_cast<double>(k)};
      history.push_back(std::move(o));
    }
    EXPECT_GE(layers.size(), 2u) << named.name << " should explore several levels";
  }
}

TEST(SteppedParamsTest, GridWalksEveryLevelOnce) {
  std::unique_ptr<Sampler> grid = NewGridSampler(SteppedSpace());
  std::set<std::pair<int64_t, double>> points;
  for (int n = 0;; ++n) {
    absl::StatusOr<Params> p = grid->Ask(testing::At(n));
    if (!p.ok()) break;
    points.insert({std::get<int64_t>(p->at("n_layers")), std::get<double>(p->at("dropout"))});
  }
  EXPECT_EQ(points.size(), 4u * 5u);
}

TEST(SteppedParamsTest, GridPointsPicksEvenlySpacedLevels) {
  SearchSpace space;
  space.params = {Stepped("x", ParamSpec::Kind::kFloat, 0, 1, 0.1)};
  space.params[0].grid_points = 3;
  std::unique_ptr<Sampler> grid = NewGridSampler(space);
  std::vector<double> xs;
  for (int n = 0;; ++n) {
    absl::StatusOr<Params> p = grid->Ask(testing::At(n));
    if (!p.ok()) break;
    xs.push_back(std::get<double>(p->at("x")));
  }
  EXPECT_THAT(xs, ElementsAre(0, 0.5, 1));
}

}  // namespace
}  // namespace sextant
