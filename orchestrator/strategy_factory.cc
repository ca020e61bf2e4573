#include "orchestrator/strategy_factory.h"

#include <algorithm>

#include "orchestrator/experiment_loader.h"

namespace sextant {

absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(const v1::ExperimentSpec& spec) {
  SearchSpace space = ToSearchSpace(spec);
  const v1::Search& search = spec.search();
  const int objectives = std::max(1, spec.objectives_size());
  const int constraints = spec.constraints_size();
  if (search.sampler() == v1::Search::BAYESIAN) {
    BayesianOptions options;
    options.seed = search.seed();
    options.initial_design = search.initial_design();
    options.objectives = objectives;
    options.constraints = constraints;
    options.cost_aware = search.cost_aware();
    return NewBayesianSampler(space, options);
  }
  if (search.sampler() == v1::Search::NSGA2) {
    Nsga2Options options;
    options.seed = search.seed();
    options.objectives = objectives;
    return NewNsga2Sampler(space, options);
  }
  // BOHB pairs Hyperband with a model: multivariate TPE (its KDE), or the GP when asked for.
  if (search.scheduler() == v1::Search::BOHB || search.sampler() == v1::Search::TPE) {
    TpeOptions options;
    options.seed = search.seed();
    options.multivariate = true;
    options.objectives = objectives;
    options.constraints = constraints;
    if (search.initial_design() > 0) options.startup_trials = search.initial_design();
    return NewTpeSampler(space, options);
  }
  switch (search.sampler()) {
    case v1::Search::GRID:
      return NewGridSampler(space);
    case v1::Search::SOBOL:
      return NewSobolSampler(space, search.seed());
    default:
      return NewRandomSampler(space, search.seed());
  }
}

std::unique_ptr<Scheduler> MakeScheduler(const v1::ExperimentSpec& spec) {
  const v1::Search& search = spec.search();
  FidelitySpec fidelity;
  fidelity.name = search.fidelity().name();
  fidelity.min = search.fidelity().min();
  fidelity.max = search.fidelity().max();
  fidelity.reduction_factor = search.fidelity().reduction_factor();
  switch (search.scheduler()) {
    case v1::Search::ASHA: {
      AshaOptions options;
      options.fidelity = fidelity;
      options.promotion = search.asha_mode() != "stopping";
      return NewAshaScheduler(options);
    }
    case v1::Search::HYPERBAND:
    case v1::Search::BOHB:
      return NewHyperbandScheduler(fidelity);
    case v1::Search::MEDIAN: {
      MedianStoppingOptions options;
      options.fidelity = fidelity;
      return NewMedianStoppingScheduler(options);
    }
    default:
      return nullptr;
  }
}

}  // namespace sextant
