#include "orchestrator/federated/client_selection.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "aggregator/federation_plan.h"
#include "aggregator/tier_settings.h"
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

namespace {

// The `k` clients of `pool` that f.client_selection picks, drawing from rng.
std::vector<Participant> Pick(std::vector<Participant> pool, int64_t k, const v1::Federation& f,
                              const ClientSpeeds& speeds, std::mt19937_64& rng) {
  std::shuffle(pool.begin(), pool.end(), rng);
  const std::string& policy = f.client_selection();
  if (policy == "fastest" || policy == "power_of_choice") {
    if (policy == "power_of_choice") {
      pool.resize(std::min<size_t>(pool.size(), static_cast<size_t>(2 * k)));
    }
    auto seconds = [&](const Participant& p) {
      return speeds.Estimate(ClientId(p.region, p.index)).value_or(0.0);
    };
    std::stable_sort(pool.begin(), pool.end(), [&](const Participant& a, const Participant& b) {
      return seconds(a) < seconds(b);
    });
  }
  pool.resize(std::min<size_t>(pool.size(), static_cast<size_t>(k)));
  return pool;
}

}  // namespace

std::vector<Participant> SelectClients(const v1::Federation& f, int64_t round,
                                       const ClientSpeeds& speeds) {
  std::mt19937_64 rng(f.seed() * 1000003ULL + static_cast<uint64_t>(round));
  const std::vector<int64_t> quota = RegionQuotas(f);
  std::vector<Participant> chosen;
  if (quota.empty() || Buffered(f)) {
    for (const auto& r : f.regions()) {
      for (int i = 0; i < r.clients(); ++i) chosen.push_back({r.name(), i});
    }
    if (Buffered(f)) return chosen;
    return Pick(std::move(chosen), ClientsPerRound(f), f, speeds, rng);
  }
  for (int r = 0; r < f.regions_size(); ++r) {
    std::vector<Participant> region;
    for (int i = 0; i < f.regions(r).clients(); ++i) region.push_back({f.regions(r).name(), i});
    for (Participant& p : Pick(std::move(region), quota[r], f, speeds, rng)) {
      chosen.push_back(std::move(p));
    }
  }
  return chosen;
}

}  // namespace sextant
