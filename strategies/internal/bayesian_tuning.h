#ifndef SEXTANT_STRATEGIES_INTERNAL_BAYESIAN_TUNING_H_
#define SEXTANT_STRATEGIES_INTERNAL_BAYESIAN_TUNING_H_

#include <memory>
#include <optional>

#include "strategies/gaussian_process.h"
#include "strategies/internal/acquisition_optimizer.h"
#include "strategies/internal/output_transform.h"
#include "strategies/sampler.h"

namespace sextant::internal {

// How pending (still running) trials enter the model.
enum class PendingStrategy {
  kKrigingBeliever,  // each counts as observed at the model's own prediction there
  kConstantLiar,     // each counts as observed at the worst value seen so far
};

// The Bayesian sampler's internal choices, for tests and for benchmarking alternatives.
// The defaults are what NewBayesianSampler uses.
struct BayesianTuning {
  OutputWarp warp = OutputWarp::kTailLog;
  PendingStrategy pending = PendingStrategy::kKrigingBeliever;
  std::optional<GpPrior> prior;    // default: DefaultGpPrior(encoded dimension)
  AcquisitionOptions acquisition;  // its seed is ignored: each suggestion derives its own
};

// NewBayesianSampler with explicit tuning.
std::unique_ptr<Sampler> NewBayesianSamplerWithTuning(SearchSpace space, BayesianOptions options,
                                                      BayesianTuning tuning);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_BAYESIAN_TUNING_H_
