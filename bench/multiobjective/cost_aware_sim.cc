// In-process companion of cost_aware.py: the bayesian sampler plain vs cost_aware on the same
// problems, driven directly with the modelled cost (3 s x width / 1024 plus a fixed start-up
// per trial, at 0.20 USD/h) and no ledger, so that many seeds run in minutes. It is a tuning
// aid; the figures quoted in RESULTS.md come from cost_aware.py through `sextant run`.
//   cost_aware_sim [--problem moderate|widest] [--seeds 80] [--trials 50] [--startup 0.04]
//                  [--budget DOLLARS (instead of --trials: a max_cost run)]
// Prints, per mode, the median dollars to plain's final best per seed, how many seeds reach it,
// and the headline ratio (median cost_aware / median plain) and the median per-seed ratio.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

constexpr double kPricePerSecond = 0.20 / 3600;

double Loss(const std::string& problem, double width, double x0, double x1) {
  const double pi = M_PI;
  const double b = std::pow(x1 - 5.1 / (4 * pi * pi) * x0 * x0 + 5 / pi * x0 - 6, 2) +
                   10 * (1 - 1 / (8 * pi)) * std::cos(x0) + 10;
  double capacity = 2 * std::sqrt(16 / width);
  if (problem == "moderate") capacity += 0.25 * std::log(width / 16);
  return b + capacity;
}

struct Run {
  std::vector<double> loss, dollars;
};

// trials > 0: that many trials, budget_used = trials so far / trials. budget > 0 instead: trials
// until budget dollars are spent, budget_used = dollars so far / budget (a `max_cost` run).
Run Search(const std::string& problem, bool cost_aware, uint64_t seed, int trials, double startup,
           double budget) {
  SearchSpace space;
  space.params = {{"width", ParamSpec::Kind::kFloat, 16, 1024, true},
                  {"x0", ParamSpec::Kind::kFloat, -5, 10},
                  {"x1", ParamSpec::Kind::kFloat, 0, 15}};
  BayesianOptions o;
  o.seed = seed;
  o.cost_aware = cost_aware;
  std::unique_ptr<Sampler> sampler = NewBayesianSampler(space, o);
  std::vector<Observation> history;
  Run run;
  double spent = 0;
  for (int t = 0; budget > 0 ? spent < budget : t < trials; ++t) {
    SampleRequest request;
    request.trial_number = t;
    request.history = history;
    request.budget_used = budget > 0 ? spent / budget : static_cast<double>(t) / trials;
    absl::StatusOr<Params> p = sampler->Ask(request);
    if (!p.ok()) {
      std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
      std::exit(1);
    }
    const double width = std::get<double>(p->at("width"));
    Observation obs;
    obs.params = *p;
    obs.outcome = Observation::Outcome::kCompleted;
    obs.value = Loss(problem, width, std::get<double>(p->at("x0")), std::get<double>(p->at("x1")));
    obs.cost = (3.0 * width / 1024 + startup) * kPricePerSecond;
    run.loss.push_back(*obs.value);
    run.dollars.push_back(*obs.cost);
    spent += *obs.cost;
    history.push_back(std::move(obs));
  }
  return run;
}

// Dollars spent up to the first trial at or below target; +inf when none is.
double DollarsTo(const Run& r, double target) {
  double spent = 0;
  for (size_t i = 0; i < r.loss.size(); ++i) {
    spent += r.dollars[i];
    if (r.loss[i] <= target) return spent;
  }
  return std::numeric_limits<double>::infinity();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace
}  // namespace sextant

int main(int argc, char** argv) {
  std::string problem = "moderate";
  int seeds = 80, trials = 50;
  double startup = 0.04, budget = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--problem")) problem = argv[i + 1];
    if (!std::strcmp(argv[i], "--seeds")) seeds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--trials")) trials = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--startup")) startup = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--budget")) budget = std::atof(argv[i + 1]);
  }
  std::vector<double> plain, aware, ratios;
  int reached = 0;
  for (int s = 0; s < seeds; ++s) {
    const sextant::Run p = sextant::Search(problem, false, s, trials, startup, budget);
    const sextant::Run c = sextant::Search(problem, true, s, trials, startup, budget);
    const double target = *std::min_element(p.loss.begin(), p.loss.end());
    plain.push_back(sextant::DollarsTo(p, target));
    aware.push_back(sextant::DollarsTo(c, target));
    reached += std::isfinite(aware.back());
    ratios.push_back(aware.back() / plain.back());
    std::printf(
        "seed=%d plain=%.6f cost_aware=%.6f ratio=%.3f plain_trials=%zu "
        "cost_aware_trials=%zu\n",
        s, plain.back(), aware.back(), ratios.back(), p.loss.size(), c.loss.size());
    std::fflush(stdout);
  }
  std::printf(
      "problem=%s seeds=%d median_plain=%.6f median_cost_aware=%.6f headline=%.3f "
      "median_ratio=%.3f reached=%d\n",
      problem.c_str(), seeds, sextant::Median(plain), sextant::Median(aware),
      sextant::Median(aware) / sextant::Median(plain), sextant::Median(ratios), reached);
}
