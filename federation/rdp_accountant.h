#ifndef SEXTANT_FEDERATION_RDP_ACCOUNTANT_H_
#define SEXTANT_FEDERATION_RDP_ACCOUNTANT_H_

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sextant {

// Options of RdpAccountant.
struct RdpAccountantOptions {
  // sigma: the noise standard deviation divided by the L2 sensitivity of the (weighted) sum.
  double noise_multiplier = 1.0;  // default 1
  // q: each client takes part in a round independently with this probability (Poisson
  // sampling); 1 (default) when every client takes part.
  double sampling_rate = 1.0;
  double delta = 1e-5;  // default 1e-5
  // The run stops before a round would take epsilon above this; default +inf (never).
  double target_epsilon = std::numeric_limits<double>::infinity();
  // RDP orders alpha > 1. Empty (default): DefaultRdpOrders(sampling_rate < 1).
  // Fractional orders are allowed only with sampling_rate == 1.
  std::vector<double> orders;
};

// The default RDP orders: 2..64 and 80, 96, 128, 256, with 1.25, 1.5 and 1.75 in front when
// clients are not sampled (fractional orders hold only for q = 1).
std::vector<double> DefaultRdpOrders(bool sampled);

// A Renyi-DP accountant for the (Poisson-subsampled) Gaussian mechanism, composed over rounds,
// reporting the cumulative (epsilon, delta) of client-level DP.
//  - Gaussian, q = 1: RDP(alpha) = alpha / (2 sigma^2) (Mironov, "Renyi Differential Privacy",
//    CSF 2017, Prop. 7), for any order.
//  - Subsampled, integer alpha: RDP(alpha) = log(A_alpha) / (alpha - 1) with
//    A_alpha = sum_k C(alpha, k) (1 - q)^(alpha - k) q^k exp((k^2 - k) / (2 sigma^2))
//    (Mironov, Talwar, Zhang, "Renyi Differential Privacy of the Sampled Gaussian Mechanism",
//    2019, Sec. 3.3; the same sum as TensorFlow Privacy / Opacus `_compute_log_a_int`),
//    evaluated in log space.
//  - Conversion to (epsilon, delta): epsilon = min over alpha of
//    RDP(alpha) + log1p(-1/alpha) - log(delta * alpha) / (alpha - 1)
//    (Balle et al. 2020, Thm. 21; Canonne, Kamath, Steinke 2020), as in
//    Google's dp_accounting.
// Not thread-safe; owned by the orchestrator loop.
class RdpAccountant {
 public:
  // InvalidArgument for sigma <= 0, q outside (0, 1], delta outside (0, 1), a target <= 0, an
  // order <= 1, or a fractional order with q < 1.
  static absl::StatusOr<RdpAccountant> Create(RdpAccountantOptions options);

  // Records `rounds` more rounds.
  void Compose(int64_t rounds = 1);

  // Cumulative epsilon at options.delta after the rounds composed so far (0 before any).
  double Epsilon() const { return EpsilonAfter(0); }
  // Epsilon if `more_rounds` further rounds were composed.
  double EpsilonAfter(int64_t more_rounds) const;
  // OK when one more round keeps epsilon <= target_epsilon; ResourceExhausted (with the epsilon
  // it would reach) otherwise: the run stops there.
  absl::Status CheckNextRound() const;

  int64_t rounds() const { return rounds_; }
  const std::vector<double>& orders() const { return orders_; }
  // RDP of one round at each order.
  const std::vector<double>& rdp_per_round() const { return rdp_; }

  // RDP at `order` of one round of the Gaussian mechanism with sampling rate q.
  static double GaussianRdp(double q, double noise_multiplier, double order);
  // Epsilon at delta from RDP values per order (the conversion above).
  static double EpsilonFromRdp(absl::Span<const double> orders, absl::Span<const double> rdp,
                               double delta);

 private:
  explicit RdpAccountant(RdpAccountantOptions options);
  RdpAccountantOptions options_;
  std::vector<double> orders_;
  std::vector<double> rdp_;
  int64_t rounds_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_RDP_ACCOUNTANT_H_
