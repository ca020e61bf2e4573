#include "orchestrator/cost/pool_offer.h"

#include "absl/strings/str_cat.h"

namespace sextant {

Market PoolMarket(v1::Pool::Market market) {
  switch (market) {
    case v1::Pool::SPOT:
      return Market::kSpot;
    case v1::Pool::RESERVED:
      return Market::kReserved;
    default:
      return Market::kOnDemand;
  }
}

absl::StatusOr<PoolOffer> ResolvePoolOffer(const Catalog& catalog, const v1::Pool& pool) {
  const Market market = PoolMarket(pool.market());
  const Offer* offer = catalog.Find(pool.region(), pool.instance(), market);
  const InstanceType* type = catalog.FindInstance(pool.instance());
  if (offer == nullptr || type == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("pool ", pool.name(), ": the catalog sells no ",
                                                   MarketName(market), " ", pool.instance(), " in ",
                                                   pool.region()));
  }
  return PoolOffer{*offer, *type, CostOwner{pool.name(), pool.region(), offer->market}};
}

}  // namespace sextant
