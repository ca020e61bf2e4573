// Suggestion latency of the Bayesian sampler with several objectives: 200 finished trials of
// ZDT1 (2 objectives) or DTLZ2 (3) in 6-D at random points, the sampler kept between
// suggestions (warm-started hyperparameters, as in a run) or fresh for each (cold fits).
//   ninja -C build mo_bayesian_bench && build/bench/mo_bayesian_bench

#include <benchmark/benchmark.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "absl/strings/str_cat.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

constexpr int kDims = 6;

SearchSpace UnitSpace() {
  SearchSpace space;
  for (int d = 0; d < kDims; ++d) {
    ParamSpec spec;
    spec.name = absl::StrCat("x", d);
    spec.min = 0;
    spec.max = 1;
    space.params.push_back(spec);
  }
  return space;
}

std::vector<double> Objectives(const Params& p, int objectives) {
  std::vector<double> x;
  for (int d = 0; d < kDims; ++d) x.push_back(std::get<double>(p.at(absl::StrCat("x", d))));
  if (objectives == 2) {  // ZDT1
    double g = 0;
    for (int i = 1; i < kDims; ++i) g += x[i];
    g = 1 + 9 * g / (kDims - 1);
    return {x[0], g * (1 - std::sqrt(x[0] / g))};
  }
  double g = 0;  // DTLZ2
  for (int i = 2; i < kDims; ++i) g += (x[i] - 0.5) * (x[i] - 0.5);
  const double a = x[0] * std::numbers::pi / 2, b = x[1] * std::numbers::pi / 2;
  return {(1 + g) * std::cos(a) * std::cos(b), (1 + g) * std::cos(a) * std::sin(b),
          (1 + g) * std::sin(a)};
}

// `finished` random trials, then `pending` running ones.
std::vector<Observation> History(int finished, int pending, int objectives) {
  auto random = NewRandomSampler(UnitSpace(), 1);
  std::vector<Observation> history;
  for (int t = 0; t < finished + pending; ++t) {
    SampleRequest request;
    request.trial_number = t;
    Observation o;
    o.params = *random->Ask(request);
    if (t < finished) {
      o.outcome = Observation::Outcome::kCompleted;
      o.values = Objectives(o.params, objectives);
    }
    history.push_back(std::move(o));
  }
  return history;
}

BayesianOptions Options(int objectives) {
  BayesianOptions options;
  options.seed = 5;
  options.objectives = objectives;
  return options;
}

// args: objectives, pending trials.
void BM_WarmSuggestion(benchmark::State& state) {
  const auto objectives = static_cast<int>(state.range(0));
  const std::vector<Observation> history =
      History(200, static_cast<int>(state.range(1)), objectives);
  auto sampler = NewBayesianSampler(UnitSpace(), Options(objectives));
  SampleRequest request;
  request.trial_number = static_cast<int64_t>(history.size());
  request.history = history;
  benchmark::DoNotOptimize(sampler->Ask(request));  // the cold first fit
  for (auto _ : state) benchmark::DoNotOptimize(sampler->Ask(request));
}
BENCHMARK(BM_WarmSuggestion)
    ->Args({2, 0})
    ->Args({2, 4})
    ->Args({3, 0})
    ->Unit(benchmark::kMillisecond);

void BM_ColdSuggestion(benchmark::State& state) {
  const auto objectives = static_cast<int>(state.range(0));
  const std::vector<Observation> history = History(200, 0, objectives);
  SampleRequest request;
  request.trial_number = static_cast<int64_t>(history.size());
  request.history = history;
  for (auto _ : state) {
    auto sampler = NewBayesianSampler(UnitSpace(), Options(objectives));
    benchmark::DoNotOptimize(sampler->Ask(request));
  }
}
BENCHMARK(BM_ColdSuggestion)->Args({2, 0})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sextant
