#include "orchestrator/cost/federated_placement.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

double FirstIncrement(const Offer& offer) {
  return offer.billing.price_per_second *
         std::max(offer.billing.minimum_seconds, offer.billing.increment_seconds);
}

}  // namespace

std::string MissingTransferPrice(const std::string& global, const std::string& region) {
  if (global == kInternet) {
    return absl::StrCat("the catalog prices no transfer from ", region,
                        " to the internet (add transfer.to_internet_per_gb)");
  }
  return absl::StrCat("the catalog prices no transfer between ", global, " and ", region,
                      " (add transfer.pairs or transfer.between_regions_per_gb)");
}

absl::StatusOr<FederatedPlacement> FederatedPlacement::Create(const v1::ExperimentSpec& spec,
                                                              const Catalog& catalog) {
  const v1::Federation& fed = spec.federation();
  if (fed.regions_size() == 0) return absl::InvalidArgumentError("the federation has no regions");
  FederatedPlacement p;
  p.global_ = fed.global_region().empty() ? fed.regions(0).name() : fed.global_region();
  if (p.global_ != kInternet && !catalog.HasRegion(p.global_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("federation.global_region: unknown region '", p.global_, "'"));
  }
  for (const v1::FederatedRegion& r : fed.regions()) {
    for (bool aggregator : {false, true}) {
      std::optional<PoolOffer> best;
      for (const v1::Pool& pool : spec.resources().pools()) {
        if (pool.region() != r.name() || !PoolHosts(pool, aggregator)) continue;
        absl::StatusOr<PoolOffer> offer = ResolvePoolOffer(catalog, pool);
        if (!offer.ok()) return offer.status();
        p.pools_.emplace(pool.name(), *offer);
        if (!best || FirstIncrement(offer->offer) < FirstIncrement(best->offer)) best = *offer;
      }
      if (!best) {
        return absl::InvalidArgumentError(absl::StrCat("region '", r.name(),
                                                       "' has no pool that can host its ",
                                                       aggregator ? "aggregator" : "clients"));
      }
      p.first_increments_ += FirstIncrement(best->offer) * (aggregator ? 1 : r.clients());
      p.instances_[best->owner.pool] += aggregator ? 1 : r.clients();
      (aggregator ? p.aggregators_ : p.clients_).emplace(r.name(), *best);
    }
    const std::optional<double> down = catalog.TransferPricePerGb(p.global_, r.name());
    const std::optional<double> up = catalog.TransferPricePerGb(r.name(), p.global_);
    if (!down || !up) {
      return absl::InvalidArgumentError(MissingTransferPrice(p.global_, r.name()));
    }
    p.per_byte_[r.name()] = {*down / 1e9, *up / 1e9};
  }
  return p;
}

const PoolOffer& FederatedPlacement::For(const std::string& region, bool aggregator) const {
  return (aggregator ? aggregators_ : clients_).at(region);
}

int FederatedTrialsAtOnce(const v1::ExperimentSpec& spec, const FederatedPlacement& placement) {
  int64_t fit = std::max(1, spec.search().max_concurrent());
  for (const v1::Pool& pool : spec.resources().pools()) {
    auto used = placement.instances().find(pool.name());
    if (used == placement.instances().end() || used->second == 0) continue;
    fit = std::min<int64_t>(fit, pool.max_instances() / used->second);
  }
  return static_cast<int>(fit);
}

uint64_t SpotMarketSeed(const v1::Federation& federation, int64_t last_round) {
  return federation.seed() * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(last_round);
}

}  // namespace sextant
