// Optimisers over a model's parameters: SGD with momentum, and Adam; both with L2 weight decay
// (the formulas are in backend.h, SgdStep and AdamStep).
#ifndef SEXTANT_WORKER_TRAIN_OPTIMIZER_H_
#define SEXTANT_WORKER_TRAIN_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/checkpoint.h"
#include "worker/train/backend.h"

namespace sextant::train {

struct OptimizerOptions {
  std::string kind = "adam";                        // "adam" or "sgd". Default "adam".
  float lr = 1e-3f;                                 // learning rate, > 0. Default 1e-3.
  float momentum = 0.9f;                            // sgd only, in [0, 1). Default 0.9.
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam only. Defaults 0.9, 0.999, 1e-8.
  float weight_decay = 0;                           // L2 coefficient, >= 0. Default 0.
};

// InvalidArgument naming the field (optimizer, lr, momentum, weight_decay, ...).
absl::Status ValidateOptimizerOptions(const OptimizerOptions& o);

// Updates parameters from gradients and keeps its own state (momentum, moments, step count) in
// backend memory. Not thread-safe.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one update to every parameter from the gradient at the same index.
  virtual void Step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads) = 0;
  // Updates applied so far.
  virtual int64_t steps() const = 0;
  // Appends the state (step count, then each state buffer) to `out`.
  virtual void Save(ByteWriter& out) = 0;
  // Restores what Save wrote for the same parameter shapes; DataLoss on any mismatch.
  virtual absl::Status Load(ByteReader& in) = 0;
};

// An optimiser for parameters shaped like `params`, with zeroed state. Errors as
// ValidateOptimizerOptions, or ResourceExhausted when its state does not fit.
absl::StatusOr<std::unique_ptr<Optimizer>> NewOptimizer(const OptimizerOptions& options,
                                                        const std::vector<Tensor>& params,
                                                        Backend* backend);

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_OPTIMIZER_H_
