#include "orchestrator/federated/client_selection.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "aggregator/federation_plan.h"
#include "common/ids.h"
#include "nlohmann/json.hpp"

namespace sextant {

void ClientSpeeds::Observe(const std::string& client_id, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return;
  auto [it, fresh] = seconds_.try_emplace(client_id, seconds);
  if (!fresh) it->second = 0.5 * it->second + 0.5 * seconds;
}

std::optional<double> ClientSpeeds::Estimate(const std::string& client_id) const {
  auto it = seconds_.find(client_id);
  if (it == seconds_.end()) return std::nullopt;
  return it->second;
}

std::string ClientSpeeds::ToJson() const { return nlohmann::json(seconds_).dump(); }

absl::StatusOr<ClientSpeeds> ClientSpeeds::FromJson(absl::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return absl::InvalidArgumentError("client speeds: not a JSON object");
  ClientSpeeds s;
  for (const auto& [id, v] : j.items()) {
    if (!v.is_number()) {
      return absl::InvalidArgumentError(absl::StrCat("client speeds: '", id, "' is not a number"));
    }
    s.Observe(id, v.get<double>());
  }
  return s;
}

int64_t ClientsPerRound(const v1::Federation& f) {
  const int64_t total = TotalClients(f);
  const double per = f.clients_per_round();
  int64_t k = per <= 1 ? static_cast<int64_t>(std::ceil(per * static_cast<double>(total)))
                       : static_cast<int64_t>(per);
  return std::clamp<int64_t>(std::max<int64_t>(k, f.min_clients()), 1, std::max<int64_t>(total, 1));
}

std::vector<Participant> SelectClients(const v1::Federation& f, int64_t round,
                                       const ClientSpeeds& speeds) {
  std::vector<Participant> all;
  for (const auto& r : f.regions()) {
    for (int i = 0; i < r.clients(); ++i) all.push_back({r.name(), i});
  }
  const int64_t k = ClientsPerRound(f);
  std::mt19937_64 rng(f.seed() * 1000003ULL + static_cast<uint64_t>(round));
  std::shuffle(all.begin(), all.end(), rng);
  const std::string& policy = f.client_selection();
  if (policy == "fastest" || policy == "power_of_choice") {
    if (policy == "power_of_choice") {
      all.resize(std::min<size_t>(all.size(), static_cast<size_t>(2 * k)));
    }
    auto seconds = [&](const Participant& p) {
      return speeds.Estimate(ClientId(p.region, p.index)).value_or(0.0);
    };
    std::stable_sort(all.begin(), all.end(), [&](const Participant& a, const Participant& b) {
      return seconds(a) < seconds(b);
    });
  }
  all.resize(std::min<size_t>(all.size(), static_cast<size_t>(k)));
  return all;
}

}  // namespace sextant
