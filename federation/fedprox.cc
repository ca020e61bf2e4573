#include "federation/fedprox.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

absl::Status CheckProx(size_t weights, size_t global, double mu) {
  if (weights != global) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights have ", weights, " values but the global model has ", global));
  }
  if (!std::isfinite(mu) || mu < 0) {
    return absl::InvalidArgumentError(absl::StrCat("mu must be finite and >= 0, got ", mu));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status AddProximalGradient(absl::Span<float> gradient, absl::Span<const float> weights,
                                 absl::Span<const float> global, double mu) {
  if (absl::Status s = CheckProx(weights.size(), global.size(), mu); !s.ok()) return s;
  if (gradient.size() != weights.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gradient has ", gradient.size(), " values but the weights have ", weights.size()));
  }
  const float m = static_cast<float>(mu);
  for (size_t i = 0; i < gradient.size(); ++i) gradient[i] += m * (weights[i] - global[i]);
  return absl::OkStatus();
}

absl::StatusOr<double> ProximalLoss(absl::Span<const float> weights, absl::Span<const float> global,
                                    double mu) {
  if (absl::Status s = CheckProx(weights.size(), global.size(), mu); !s.ok()) return s;
  double sum = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double diff = static_cast<double>(weights[i]) - global[i];
    sum += diff * diff;
  }
  return 0.5 * mu * sum;
}

}  // namespace sextant
