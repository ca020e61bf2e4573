#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "strategies/pareto.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

using Outcome = Observation::Outcome;
// Objectives (minimised), or nullopt for a failed trial.
using Objectives = std::function<std::optional<std::vector<double>>(const Params&)>;
// Constraint violations (<= 0 satisfied).
using Constraints = std::function<std::vector<double>(const Params&)>;

ParamSpec FloatParam(const std::string& name, double min, double max, bool log = false) {
  ParamSpec spec;
  spec.name = name;
  spec.min = min;
  spec.max = max;
  spec.log = log;
  return spec;
}

SampleRequest At(int64_t n, const std::vector<Observation>& history) {
  SampleRequest request;
  request.trial_number = n;
  request.history = history;
  return request;
}

SearchSpace UnitCube(int dims) {
  SearchSpace space;
  for (int d = 0; d < dims; ++d)
    space.params.push_back(FloatParam(std::string("x") + std::to_string(d), 0, 1));
  return space;
}

double X(const Params& p, int d) {
  return std::get<double>(p.at(std::string("x") + std::to_string(d)));
}

std::optional<std::vector<double>> Zdt1(const Params& p) {
  const int n = static_cast<int>(p.size());
  double sum = 0;
  for (int d = 1; d < n; ++d) sum += X(p, d);
  const double f1 = X(p, 0), g = 1 + 9 * sum / (n - 1);
  return std::vector<double>{f1, g * (1 - std::sqrt(f1 / g))};
}

Observation Finish(Params params, const Objectives& objectives, const Constraints& constraints) {
  Observation o;
  o.params = std::move(params);
  std::optional<std::vector<double>> values = objectives(o.params);
  o.outcome = values.has_value() ? Outcome::kCompleted : Outcome::kFailed;
  if (values.has_value()) o.values = *values;
  if (constraints) o.violations = constraints(o.params);
  return o;
}

// Runs trials sequentially, each asked with every earlier result.
std::vector<Observation> RunTrials(Sampler& sampler, const Objectives& objectives, int trials,
                                   const Constraints& constraints = nullptr) {
  std::vector<Observation> history;
  for (int i = 0; i < trials; ++i) {
    absl::StatusOr<Params> params = sampler.Ask(At(i, history));
    EXPECT_TRUE(params.ok()) << params.status();
    if (!params.ok()) break;
    history.push_back(Finish(*params, objectives, constraints));
  }
  return history;
}

double HypervolumeOf(const std::vector<Observation>& history, size_t trials,
                     const std::vector<double>& reference) {
  std::vector<std::vector<double>> points;
  for (size_t i = 0; i < std::min(trials, history.size()); ++i) {
    if (history[i].outcome == Outcome::kCompleted && Feasible(history[i])) {
      points.push_back(history[i].values);
    }
  }
  return Hypervolume(points, reference);
}

Nsga2Options Options(uint64_t seed, int population_size = 0) {
  Nsga2Options options;
  options.seed = seed;
  options.population_size = population_size;
  return options;
}

TEST(Nsga2SamplerTest, SameSeedAndHistoryGiveSameSuggestions) {
  auto a = NewNsga2Sampler(UnitCube(5), Options(4));
  auto b = NewNsga2Sampler(UnitCube(5), Options(4));
  auto c = NewNsga2Sampler(UnitCube(5), Options(5));
  const auto ha = RunTrials(*a, Zdt1, 80);
  const auto hb = RunTrials(*b, Zdt1, 80);
  const auto hc = RunTrials(*c, Zdt1, 80);
  ASSERT_EQ(ha.size(), 80u);
  int differ = 0;
  for (size_t i = 0; i < ha.size(); ++i) {
    EXPECT_EQ(ha[i].params, hb[i].params) << "trial " << i;
    differ += ha[i].params != hc[i].params;
  }
  EXPECT_GT(differ, 70);
  // No state carries over between calls.
  EXPECT_EQ(*a->Ask(At(50, std::vector<Observation>(ha.begin(), ha.begin() + 50))), ha[50].params);
}

TEST(Nsga2SamplerTest, ConcurrentSuggestionsAreDistinct) {
  // 64 points in all: children collide often and must be redrawn.
  SearchSpace space;
  for (const char* name : {"a", "b", "c"}) {
    ParamSpec spec = FloatParam(name, 0, 3);
    spec.kind = ParamSpec::Kind::kInt;
    space.params.push_back(spec);
  }
  const Objectives f = [](const Params& p) {
    const auto a = static_cast<double>(std::get<int64_t>(p.at("a")));
    const auto b = static_cast<double>(std::get<int64_t>(p.at("b")));
    return std::optional<std::vector<double>>({a + b, 6 - a - b + std::get<int64_t>(p.at("c"))});
  };
  auto sampler = NewNsga2Sampler(space, Options(1, 8));
  std::vector<Observation> history = RunTrials(*sampler, f, 8);
  for (int i = 8; i < 48; ++i) {
    absl::StatusOr<Params> params = sampler->Ask(At(i, history));
    ASSERT_TRUE(params.ok());
    Observation pending;
    pending.params = *params;
    history.push_back(pending);
  }
  std::set<Params> distinct;
  for (const Observation& o : history) distinct.insert(o.params);
  EXPECT_GE(distinct.size(), 46u);  // a few of the last may exhaust the redraws
}

TEST(Nsga2SamplerTest, BeatsRandomSearchOnZdt1) {
  const std::vector<double> reference{1.1, 11};
  double nsga_total = 0, random_total = 0;
  for (uint64_t seed = 0; seed < 3; ++seed) {
    const auto nsga = RunTrials(*NewNsga2Sampler(UnitCube(10), Options(seed)), Zdt1, 200);
    const auto random = RunTrials(*NewRandomSampler(UnitCube(10), seed), Zdt1, 200);
    for (size_t trials : {100, 200}) {
      std::printf("seed %d, %zu trials: NSGA-II %.3f, random %.3f\n", static_cast<int>(seed),
                  trials, HypervolumeOf(nsga, trials, reference),
                  HypervolumeOf(random, trials, reference));
    }
    nsga_total += HypervolumeOf(nsga, 200, reference);
    random_total += HypervolumeOf(random, 200, reference);
    EXPECT_GT(HypervolumeOf(nsga, 200, reference), HypervolumeOf(random, 200, reference));
  }
  // The true front's hypervolume is 11.1 * 1.1 - 2/3 ~ 11.54.
  EXPECT_GT(nsga_total / 3, random_total / 3 + 0.5);
}

TEST(Nsga2SamplerTest, InfeasibleParentsLose) {
  // Feasible only where x0 >= 0.6: random search lands there 40% of the time.
  const Constraints c = [](const Params& p) { return std::vector<double>{0.6 - X(p, 0)}; };
  auto sampler = NewNsga2Sampler(UnitCube(4), Options(2));
  const auto history = RunTrials(*sampler, Zdt1, 150, c);
  int feasible = 0;
  for (size_t i = 100; i < history.size(); ++i) feasible += Feasible(history[i]);
  EXPECT_GE(feasible, 40);
}

TEST(Nsga2SamplerTest, FailedAndValuelessTrialsNeverBecomeParents) {
  // Trials with x0 > 0.5 fail, or complete without their values; the good-looking failed
  // region must not attract the children.
  const Objectives f = [](const Params& p) -> std::optional<std::vector<double>> {
    if (X(p, 0) > 0.75) return std::nullopt;
    if (X(p, 0) > 0.5) return std::vector<double>{};
    return std::vector<double>{1 - X(p, 0), 1 - X(p, 1)};
  };
  auto sampler = NewNsga2Sampler(UnitCube(2), Options(3));
  const auto history = RunTrials(*sampler, f, 120);
  int outside = 0;
  for (size_t i = 60; i < history.size(); ++i) outside += X(history[i].params, 0) > 0.5;
  EXPECT_LE(outside, 12);
}

TEST(Nsga2SamplerTest, CategoricalAndConditionalParamsStayValid) {
  SearchSpace space;
  ParamSpec kind;
  kind.name = "kind";
  kind.kind = ParamSpec::Kind::kCategorical;
  kind.values = {"a", "b", "c"};
  space.params.push_back(kind);
  ParamSpec x = FloatParam("x", -2, 2);
  x.when = {{"kind", "a"}};
  space.params.push_back(x);
  ParamSpec k = FloatParam("k", 1, 64, true);
  k.kind = ParamSpec::Kind::kInt;
  k.when = {{"kind", "b"}};
  space.params.push_back(k);
  space.params.push_back(FloatParam("lr", 1e-5, 1e-1, true));
  const Objectives f = [](const Params& p) {
    const double lr = std::log10(std::get<double>(p.at("lr")));
    double extra = 1;
    if (p.contains("x")) extra = std::abs(std::get<double>(p.at("x")));
    if (p.contains("k")) extra = std::abs(std::log2(std::get<int64_t>(p.at("k"))) - 3) / 3;
    return std::optional<std::vector<double>>({lr + 5 + extra, -lr - 1 + extra});
  };
  auto sampler = NewNsga2Sampler(space, Options(6, 10));
  const auto history = RunTrials(*sampler, f, 100);
  ASSERT_EQ(history.size(), 100u);
  std::set<std::string> kinds;
  for (const Observation& o : history) {
    const std::string& v = std::get<std::string>(o.params.at("kind"));
    kinds.insert(v);
    EXPECT_EQ(o.params.contains("x"), v == "a");
    EXPECT_EQ(o.params.contains("k"), v == "b");
    if (o.params.contains("x")) {
      EXPECT_LE(std::abs(std::get<double>(o.params.at("x"))), 2);
    }
    if (o.params.contains("k")) {
      const int64_t kv = std::get<int64_t>(o.params.at("k"));
      EXPECT_TRUE(kv >= 1 && kv <= 64) << kv;
    }
    const double lr = std::get<double>(o.params.at("lr"));
    EXPECT_TRUE(lr >= 1e-5 && lr <= 1e-1) << lr;
  }
  EXPECT_EQ(kinds.size(), 3u);
}

}  // namespace
}  // namespace sextant
