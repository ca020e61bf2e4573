#include "orchestrator/federated/privacy_budget.h"

#include <sodium.h>

#include <algorithm>
#include <array>
#include <utility>

#include "aggregator/federation_plan.h"
#include "federation/dp_noise.h"
#include "nlohmann/json.hpp"

namespace sextant {

absl::StatusOr<std::optional<PrivacyBudget>> PrivacyBudget::Create(
    const v1::Federation& federation, int64_t rounds_done) {
  if (!federation.has_dp()) return std::optional<PrivacyBudget>();
  RdpAccountantOptions options = DpAccountantOptions(federation);
  absl::StatusOr<RdpAccountant> accountant = RdpAccountant::Create(options);
  if (!accountant.ok()) return absl::InvalidArgumentError(accountant.status().message());
  accountant->Compose(rounds_done);
  return std::optional<PrivacyBudget>(
      PrivacyBudget(federation.dp(), std::move(options), *std::move(accountant)));
}

absl::Status PrivacyBudget::AddCentralNoise(absl::Span<float> mean, double total_weight) const {
  if (!central_) return absl::OkStatus();
  std::array<uint8_t, 32> seed;
  randombytes_buf(seed.data(), seed.size());
  const double stddev = dp_.noise_multiplier() * dp_.clip_norm() / std::max(1.0, total_weight);
  return AddGaussianNoise(mean, stddev, seed);
}

double PrivacyBudget::ComposeThrough(int64_t round) {
  if (round > accountant_.rounds()) accountant_.Compose(round - accountant_.rounds());
  return accountant_.Epsilon();
}

std::string PrivacyBudget::ToJson(int64_t round) const {
  nlohmann::json j = {{"epsilon", accountant_.Epsilon()},
                      {"delta", options_.delta},
                      {"rounds", round},
                      {"noise_multiplier", options_.noise_multiplier},
                      {"clip_norm", dp_.clip_norm()},
                      {"noise", dp_.noise()},
                      {"sampling_rate", options_.sampling_rate}};
  if (dp_.target_epsilon() > 0) j["target_epsilon"] = dp_.target_epsilon();
  return j.dump();
}

}  // namespace sextant
