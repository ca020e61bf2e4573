// A federated run's client-level DP at the global tier: the RDP accountant over its rounds, the
// central noise on each round's mean, and the privacy spent as `results` reads it.
#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_PRIVACY_BUDGET_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_PRIVACY_BUDGET_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "federation/rdp_accountant.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// Not thread-safe; owned by the run's loop.
class PrivacyBudget {
 public:
  // nullopt without federation.dp. `rounds_done`: a resumed run's completed rounds, composed at
  // once. InvalidArgument for options the accountant refuses. The sampled fraction of clients
  // is accounted as Poisson sampling at that rate (the usual approximation for fixed-size
  // sampling).
  static absl::StatusOr<std::optional<PrivacyBudget>> Create(const v1::Federation& federation,
                                                             int64_t rounds_done);

  // True with central noise (dp.noise: central, the default), false with distributed noise.
  bool central_noise() const { return central_; }
  // Central noise on a round's mean: N(0, (sigma C)^2) on the sum of clipped updates of weight 1
  // is N(0, (sigma C / total_weight)^2) on their mean. Fresh randomness on every call (the
  // noise must not be predictable); OK and nothing added with distributed noise.
  absl::Status AddCentralNoise(absl::Span<float> mean, double total_weight) const;

  // Composes the rounds up to `round` (those not composed yet) and returns epsilon then.
  double ComposeThrough(int64_t round);
  double epsilon() const { return accountant_.Epsilon(); }
  // OK when one more round keeps epsilon within dp.target_epsilon; ResourceExhausted, saying
  // the epsilon it would reach, otherwise.
  absl::Status CheckNextRound() const { return accountant_.CheckNextRound(); }

  // What meta "privacy" holds after `round`: {epsilon, delta, rounds, noise_multiplier,
  // clip_norm, noise, sampling_rate[, target_epsilon]}.
  std::string ToJson(int64_t round) const;

 private:
  PrivacyBudget(v1::DifferentialPrivacy dp, RdpAccountantOptions options, RdpAccountant a)
      : dp_(std::move(dp)),
        options_(std::move(options)),
        accountant_(std::move(a)),
        central_(dp_.noise() != "distributed") {}
  v1::DifferentialPrivacy dp_;
  RdpAccountantOptions options_;
  RdpAccountant accountant_;
  bool central_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_PRIVACY_BUDGET_H_
