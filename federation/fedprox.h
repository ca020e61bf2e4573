#ifndef SEXTANT_FEDERATION_FEDPROX_H_
#define SEXTANT_FEDERATION_FEDPROX_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sextant {

// FedProx's client-side proximal term (Li et al. 2020): the local objective is
// f(w) + (mu / 2) ||w - w_global||^2. The trainer calls these two pure functions per step.

// Adds mu * (weights - global) to gradient, in place. InvalidArgument when the three spans
// differ in length or mu is negative or not finite; gradient is then unchanged. mu = 0 leaves
// the gradient as it is (plain FedAvg).
absl::Status AddProximalGradient(absl::Span<float> gradient, absl::Span<const float> weights,
                                 absl::Span<const float> global, double mu);

// Returns (mu / 2) ||weights - global||^2, computed in double: the term's contribution to the
// loss. InvalidArgument as above.
absl::StatusOr<double> ProximalLoss(absl::Span<const float> weights, absl::Span<const float> global,
                                    double mu);

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_FEDPROX_H_
