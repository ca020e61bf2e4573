#include "federation/rdp_accountant.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {
double LogAdd(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}
}  // namespace

double RdpAccountant::GaussianRdp(double q, double sigma, double order) {
  if (q >= 1.0) return order / (2 * sigma * sigma);
  if (q <= 0.0) return 0.0;
  const int64_t alpha = static_cast<int64_t>(order);
  double log_a = -INFINITY;
  for (int64_t k = 0; k <= alpha; ++k) {
    const double log_binom =
        std::lgamma(alpha + 1.0) - std::lgamma(k + 1.0) - std::lgamma(alpha - k + 1.0);
    const double term = log_binom + k * std::log(q) + (alpha - k) * std::log1p(-q) +
                        (static_cast<double>(k) * k - k) / (2 * sigma * sigma);
    log_a = LogAdd(log_a, term);
  }
  return log_a / (order - 1);
}

std::vector<double> DefaultRdpOrders(bool sampled) {
  std::vector<double> orders;
  if (!sampled) orders = {1.25, 1.5, 1.75};
  for (int a = 2; a <= 64; ++a) orders.push_back(a);
  for (double a : {80.0, 96.0, 128.0, 256.0}) orders.push_back(a);
  return orders;
}

double RdpAccountant::EpsilonFromRdp(absl::Span<const double> orders, absl::Span<const double> rdp,
                                     double delta) {
  double best = INFINITY;
  for (size_t i = 0; i < orders.size(); ++i) {
    const double a = orders[i];
    const double eps = rdp[i] + std::log1p(-1 / a) - std::log(delta * a) / (a - 1);
    best = std::min(best, eps);
  }
  return std::max(0.0, best);
}

RdpAccountant::RdpAccountant(RdpAccountantOptions options) : options_(std::move(options)) {
  orders_ = options_.orders;
  if (orders_.empty()) orders_ = DefaultRdpOrders(options_.sampling_rate < 1);
  for (double a : orders_) {
    rdp_.push_back(GaussianRdp(options_.sampling_rate, options_.noise_multiplier, a));
  }
}

absl::StatusOr<RdpAccountant> RdpAccountant::Create(RdpAccountantOptions o) {
  if (!(o.noise_multiplier > 0 && std::isfinite(o.noise_multiplier))) {
    return absl::InvalidArgumentError("dp: noise_multiplier must be finite and > 0");
  }
  if (!(o.sampling_rate > 0 && o.sampling_rate <= 1)) {
    return absl::InvalidArgumentError("dp: sampling_rate must be in (0, 1]");
  }
  if (!(o.delta > 0 && o.delta < 1)) return absl::InvalidArgumentError("dp: delta in (0, 1)");
  if (!(o.target_epsilon > 0)) return absl::InvalidArgumentError("dp: target_epsilon must be > 0");
  for (double a : o.orders) {
    if (!(a > 1) || !std::isfinite(a)) return absl::InvalidArgumentError("dp: orders must be > 1");
    if (o.sampling_rate < 1 && a != std::floor(a)) {
      return absl::InvalidArgumentError(
          absl::StrCat("dp: fractional order ", a, " needs sampling_rate 1"));
    }
  }
  return RdpAccountant(std::move(o));
}

void RdpAccountant::Compose(int64_t rounds) { rounds_ += std::max<int64_t>(rounds, 0); }

double RdpAccountant::EpsilonAfter(int64_t more_rounds) const {
  const int64_t total = rounds_ + std::max<int64_t>(more_rounds, 0);
  if (total == 0) return 0.0;
  std::vector<double> rdp(rdp_.size());
  for (size_t i = 0; i < rdp.size(); ++i) rdp[i] = rdp_[i] * static_cast<double>(total);
  return EpsilonFromRdp(orders_, rdp, options_.delta);
}

absl::Status RdpAccountant::CheckNextRound() const {
  const double next = EpsilonAfter(1);
  if (next > options_.target_epsilon) {
    return absl::ResourceExhaustedError(
        absl::StrCat("dp: round ", rounds_ + 1, " would bring epsilon to ", next, " > target ",
                     options_.target_epsilon, " (delta ", options_.delta, ")"));
  }
  return absl::OkStatus();
}

}  // namespace sextant
