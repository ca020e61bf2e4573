#include "orchestrator/cost/placement_policy.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sextant {
namespace {

bool Fits(const PlacementRequest& r, const InstanceType& t) {
  if (t.gpus < r.gpus || t.cpus < r.cpus) return false;
  return r.gpus == 0 || t.gpu_memory_gb >= r.gpu_memory_gb;
}

}  // namespace

absl::StatusOr<PlacementOptions::Mode> ParsePlacementMode(absl::string_view name) {
  using Mode = PlacementOptions::Mode;
  if (name == "cheapest") return Mode::kCheapest;
  if (name == "spot_first") return Mode::kSpotFirst;
  if (name == "on_demand") return Mode::kOnDemand;
  if (name == "mixed") return Mode::kMixed;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown placement policy '", name,
                   "'; expected one of cheapest, spot_first, on_demand, mixed"));
}

const char* PlacementModeName(PlacementOptions::Mode mode) {
  switch (mode) {
    case PlacementOptions::Mode::kCheapest:
      return "cheapest";
    case PlacementOptions::Mode::kOnDemand:
      return "on_demand";
    case PlacementOptions::Mode::kMixed:
      return "mixed";
    default:
      return "spot_first";
  }
}

bool PlacementPolicy::WantsSpot(const PlacementRequest& request) const {
  switch (options_.mode) {
    case PlacementOptions::Mode::kSpotFirst:
    case PlacementOptions::Mode::kCheapest:
      return request.checkpoints;
    case PlacementOptions::Mode::kMixed:
      return request.checkpoints && !request.top_rung;
    default:
      return false;
  }
}

bool PlacementPolicy::Cooling(const std::string& region, absl::Time now) const {
  auto it = last_preemption_.find(region);
  return it != last_preemption_.end() &&
         now - it->second < absl::Seconds(options_.preemption_cooldown_seconds);
}

void PlacementPolicy::OnPreemption(const std::string& region, absl::Time t) {
  absl::Time& last = last_preemption_[region];
  if (t > last) last = t;
}

bool PlacementPolicy::SpotAllowed(const PlacementRequest& request,
                                  const std::vector<PoolCandidate>& pools,
                                  std::string* fallback) const {
  if (WantsSpot(request)) return true;
  for (const PoolCandidate& p : pools) {
    if (p.market != Market::kSpot && Fits(request, p.instance)) return false;
  }
  *fallback = "; no on-demand or reserved pool fits, so spot is used";
  return true;
}

bool PlacementPolicy::Admits(const PlacementRequest& request,
                             const std::vector<PoolCandidate>& pools, int pool) const {
  if (pool < 0 || pool >= static_cast<int>(pools.size())) return false;
  const PoolCandidate& p = pools[pool];
  std::string unused;
  return Fits(request, p.instance) &&
         (p.market != Market::kSpot || SpotAllowed(request, pools, &unused));
}

// Long because the reason string is assembled from each rule that shaped the choice.
Placement PlacementPolicy::Place(const PlacementRequest& request,
                                 const std::vector<PoolCandidate>& pools, absl::Time now) const {
  const bool wants_spot = WantsSpot(request);
  std::string fallback;
  const bool spot_allowed = SpotAllowed(request, pools, &fallback);
  int best = -1;
  std::tuple<int, int, double, std::string> best_key;
  std::vector<std::string> avoided;
  for (size_t i = 0; i < pools.size(); ++i) {
    const PoolCandidate& p = pools[i];
    if (!Fits(request, p.instance) || p.free_slots <= 0) continue;
    if (p.market == Market::kSpot && !spot_allowed) continue;
    int tier = 0;
    if (options_.mode != PlacementOptions::Mode::kCheapest) {
      if (wants_spot) {
        tier = p.market == Market::kSpot ? 0 : p.market == Market::kReserved ? 1 : 2;
      } else {
        tier = p.market == Market::kReserved ? 0 : p.market == Market::kOnDemand ? 1 : 2;
      }
    }
    if (p.prepaid_idle) tier = -1;  // capacity already paid for costs nothing more to use
    const bool cooling = Cooling(p.region, now);
    if (cooling) avoided.push_back(p.region);
    const double marginal = p.prepaid_idle ? 0 : p.price_per_second;
    auto key = std::make_tuple(tier, cooling ? 1 : 0, marginal, p.name);
    if (best < 0 || key < best_key) {
      best = static_cast<int>(i);
      best_key = key;
    }
  }
  const std::string need =
      absl::StrCat(request.gpus, " GPU", request.gpus == 1 ? "" : "s",
                   request.cpus > 0 ? absl::StrCat(", ", request.cpus, " CPUs") : "");
  if (best < 0) {
    return Placement::None(
        absl::StrCat("no pool with a free slot fits ", need, spot_allowed ? "" : " off spot"));
  }
  const PoolCandidate& p = pools[best];
  std::string why = absl::StrFormat(
      "pool %s (%s, %s, %s %s/h): %s under %s placement for %s", p.name, MarketName(p.market),
      p.region, p.instance.name, absl::StrFormat("%.4f", p.price_per_second * 3600),
      p.prepaid_idle ? "prepaid reserved capacity" : "cheapest fitting pool",
      PlacementModeName(options_.mode), need);
  absl::StrAppend(&why, request.top_rung ? "; top rung" : "",
                  request.checkpoints ? "; checkpoints" : "; does not checkpoint",
                  wants_spot ? ", spot preferred" : ", spot avoided", fallback);
  if (std::get<1>(best_key) == 1) {
    absl::StrAppend(&why, "; every candidate region had a recent preemption");
  } else if (!avoided.empty()) {
    absl::StrAppend(&why, "; avoided ", avoided.front(), " (preempted within the last ",
                    options_.preemption_cooldown_seconds, " s)");
  }
  return Placement::At(best, why);
}

}  // namespace sextant
