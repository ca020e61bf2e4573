#ifndef SEXTANT_FEDERATION_SERVER_OPTIMIZER_H_
#define SEXTANT_FEDERATION_SERVER_OPTIMIZER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace sextant {

// A server optimiser after Reddi et al. 2021, "Adaptive Federated Optimization" (Algorithm 2).
// Each round it is given the global model x and the pseudo-gradient delta: the aggregated client
// update (weighted mean of client model minus x), which points downhill. All arithmetic is in
// double per coordinate; the state is kept in float. Not thread-safe.
class ServerOptimizer {
 public:
  virtual ~ServerOptimizer() = default;

  // Steps the model in place with delta. InvalidArgument when the lengths differ (from each
  // other or from the state's, once set by the first step), or delta holds NaN or Inf; the model
  // and the state are then unchanged.
  absl::Status Step(absl::Span<float> model, absl::Span<const float> delta) {
    return Step(model, delta, model.size(), nullptr);
  }
  // The same step a range of at most `chunk` (>= 1) coordinates at a time, in order, calling
  // after_range(offset, count) (when given) once each range of the model is stepped: the owner
  // of a model mapped from a file gives its pages back there, so that the model is never whole
  // in memory. Errors as above, found before any coordinate changes.
  absl::Status Step(absl::Span<float> model, absl::Span<const float> delta, size_t chunk,
                    const std::function<void(size_t offset, size_t count)>& after_range);

  // The optimiser's state, for checkpoints: rounds stepped, and the first and second moments
  // (each empty when the optimiser has none or before the first step).
  struct State {
    int64_t rounds = 0;
    std::vector<float> m;
    std::vector<float> v;
  };
  virtual State state() const = 0;

  // Replaces the state with one from state(). InvalidArgument when a moment has the wrong shape
  // for this optimiser (a moment it does not use must be empty; m and v must match in length).
  virtual absl::Status Restore(State state) = 0;

 protected:
  // The moments' length: 0 when it keeps none or before the first step.
  virtual size_t state_size() const = 0;
  // Before a step of a d-value model: sizes the moments on the first.
  virtual void Prepare(size_t d) = 0;
  // Steps coordinates [offset, offset + model.size()); delta is finite and as long.
  virtual void Apply(size_t offset, absl::Span<float> model, absl::Span<const float> delta) = 0;
  // After a whole step.
  virtual void Count() = 0;
};

// FedAvg with a server learning rate: x += server_lr * delta. server_lr = 1 makes the new model
// the weighted mean of the client models.
struct FedAvgOptions {
  double server_lr = 1.0;  // default 1
};
std::unique_ptr<ServerOptimizer> NewFedAvgOptimizer(const FedAvgOptions& options);

// FedAvgM (Hsu et al. 2019): m = momentum * m + delta; x += server_lr * m.
struct FedAvgMOptions {
  double server_lr = 1.0;  // default 1
  double momentum = 0.9;   // default 0.9
};
std::unique_ptr<ServerOptimizer> NewFedAvgMOptimizer(const FedAvgMOptions& options);

// FedAdagrad, FedAdam and FedYogi share m = beta1 * m + (1 - beta1) * delta and
// x += server_lr * m / (sqrt(v) + tau), and differ in v:
//   FedAdagrad: v = v + delta^2
//   FedAdam:    v = beta2 * v + (1 - beta2) * delta^2
//   FedYogi:    v = v - (1 - beta2) * delta^2 * sign(v - delta^2)
// There is no bias correction, as in the paper. v starts at initial_v (the paper requires
// v_{-1} >= tau^2).
struct AdaptiveOptions {
  double server_lr = 0.01;  // default 0.01 (eta; the paper tunes it per task)
  double beta1 = 0.9;       // default 0.9
  double beta2 = 0.99;      // default 0.99 (unused by FedAdagrad)
  double tau = 1e-3;        // default 1e-3 (adaptivity; epsilon in Adam)
  double initial_v = 1e-6;  // default 1e-6 = tau^2 for the default tau
};
std::unique_ptr<ServerOptimizer> NewFedAdagradOptimizer(const AdaptiveOptions& options);
std::unique_ptr<ServerOptimizer> NewFedAdamOptimizer(const AdaptiveOptions& options);
std::unique_ptr<ServerOptimizer> NewFedYogiOptimizer(const AdaptiveOptions& options);

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_SERVER_OPTIMIZER_H_
