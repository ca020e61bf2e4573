#ifndef SEXTANT_ORCHESTRATOR_CORE_STRATEGY_FACTORY_H_
#define SEXTANT_ORCHESTRATOR_CORE_STRATEGY_FACTORY_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/sampler.h"
#include "strategies/scheduler.h"

namespace sextant {

// The sampler an experiment asks for: bayesian (GP), tpe (multivariate, also for BOHB),
// grid, sobol or random, seeded with search.seed; search.enqueue's configurations first
// (NewEnqueuedSampler); and, when it learns from observations, the warm start's priors ahead
// of its history (NewWarmStartedSampler; see orchestrator/core/warm_start.h). Other samplers
// ignore priors. InvalidArgument when it cannot be built. Shared by `run` and `simulate`, so
// that both drive the same strategies.
absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(const v1::ExperimentSpec& spec,
                                                     std::vector<Observation> priors = {});

// True when the experiment's sampler learns from observations (bayesian, tpe, nsga2, or any
// under BOHB); false for random, sobol and grid, which follow a fixed sequence.
bool LearnsFromObservations(const v1::ExperimentSpec& spec);

// The scheduler an experiment asks for (asha, hyperband, bohb, median), or null for none.
std::unique_ptr<Scheduler> MakeScheduler(const v1::ExperimentSpec& spec);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_STRATEGY_FACTORY_H_
