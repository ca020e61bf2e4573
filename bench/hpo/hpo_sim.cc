// In-process twin of bench/hpo/run.sh for Sextant's bayesian sampler, for tuning it quickly:
// the same problems (hpo_objective.cc is included), the same seeds, the sampler asked and told
// in a loop with no process per trial. Prints one line per (problem, seed) with the regret at
// each budget (measured on the noiseless value, as hpo_bench.py does), then the medians.
// Figures for RESULTS.md come from run.sh, which goes through `sextant run`; this is an aid.
//
//   hpo_sim [--problems cat6,ordinal] [--seeds 5] [--budgets 50,100,200] [--sampler bayesian|tpe]
#define HPO_OBJECTIVE_NO_MAIN
#include "bench/hpo/hpo_objective.cc"  // NOLINT: the problems, shared with the objective

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace {

sextant::SearchSpace SpaceOf(const Problem& p) {
  sextant::SearchSpace space;
  for (const Param& q : p.params) {
    sextant::ParamSpec spec;
    spec.name = q.name;
    const std::string type = q.type;
    spec.kind = type == "float" ? sextant::ParamSpec::Kind::kFloat
                : type == "int" ? sextant::ParamSpec::Kind::kInt
                                : sextant::ParamSpec::Kind::kCategorical;
    spec.min = q.min;
    spec.max = q.max;
    spec.step = q.step;
    spec.values = q.values;
    space.params.push_back(spec);
  }
  return space;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> names = {"cat6", "ordinal"};
  std::vector<int> budgets = {50, 100, 200};
  int seeds = 5;
  std::string sampler_name = "bayesian";
  int first_seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--problems") {
      names = absl::StrSplit(value, ',', absl::SkipEmpty());
    } else if (key == "--seeds") {
      seeds = std::atoi(value.c_str());
    } else if (key == "--budgets") {
      budgets.clear();
      for (absl::string_view b : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        budgets.push_back(std::atoi(std::string(b).c_str()));
      }
    } else if (key == "--first-seed") {
      first_seed = std::atoi(value.c_str());
    } else if (key == "--sampler") {
      sampler_name = value;
    } else {
      Fail("unknown flag " + key);
    }
  }
  const int trials = *std::max_element(budgets.begin(), budgets.end());
  for (const std::string& name : names) {
    const Problem* p = nullptr;
    for (const Problem& q : Problems()) {
      if (name == q.name) p = &q;
    }
    if (p == nullptr) Fail("unknown problem " + name);
    std::vector<std::vector<double>> regrets(budgets.size());
    for (int seed = first_seed; seed < first_seed + seeds; ++seed) {
      std::unique_ptr<sextant::Sampler> sampler;
      if (sampler_name == "tpe") {
        sextant::TpeOptions o;
        o.seed = static_cast<uint64_t>(seed);
        sampler = sextant::NewTpeSampler(SpaceOf(*p), o);
      } else {
        sextant::BayesianOptions o;
        o.seed = static_cast<uint64_t>(seed);
        sampler = sextant::NewBayesianSampler(SpaceOf(*p), o);
      }
      std::vector<sextant::Observation> history;
      std::vector<double> best_true;
      int repeats = 0;
      for (int t = 0; t < trials; ++t) {
        sextant::SampleRequest request;
        request.trial_number = t;
        request.history = history;
        absl::StatusOr<sextant::Params> params = sampler->Ask(request);
        if (!params.ok()) Fail(std::string(params.status().message()));
        Args args;
        for (const auto& [k, v] : *params) args[k] = sextant::FormatParamValue(v);
        for (const auto& o : history) repeats += o.params == *params ? 1 : 0;
        const Loss loss = Evaluate(*p, args, static_cast<uint64_t>(seed));
        sextant::Observation o;
        o.params = *params;
        o.outcome = sextant::Observation::Outcome::kCompleted;
        o.value = loss.value;
        if (std::getenv("HPO_SIM_TRACE") != nullptr && t >= 40 && t < 90) {
          std::printf("  t%d", t);
          for (const auto& [k, v] : *params) std::printf(" %s", sextant::FormatParamValue(v).c_str());
          std::printf("  %.3f (%.2f)\n", loss.value, loss.noiseless);
        }
        history.push_back(std::move(o));
        best_true.push_back(std::min(best_true.empty() ? 1e300 : best_true.back(), loss.noiseless));
      }
      std::printf("%s seed %d:", name.c_str(), seed);
      for (size_t b = 0; b < budgets.size(); ++b) {
        const double r = std::max(0.0, best_true[budgets[b] - 1] - p->optimum);
        regrets[b].push_back(r);
        std::printf(" %d:%.4g", budgets[b], r);
      }
      std::printf("  (repeats %d)\n", repeats);
      std::fflush(stdout);
    }
    std::printf("%s median:", name.c_str());
    for (size_t b = 0; b < budgets.size(); ++b) {
      std::printf(" %d:%.4g", budgets[b], Median(regrets[b]));
    }
    std::printf("\n");
  }
  return 0;
}
