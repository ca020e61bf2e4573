#ifndef SEXTANT_ORCHESTRATOR_COST_POOL_OFFER_H_
#define SEXTANT_ORCHESTRATOR_COST_POOL_OFFER_H_

#include "absl/status/statusor.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/ledger.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// An experiment pool resolved against the price catalog: what it sells, on what instance,
// and whom its bills belong to. The live fleet and the simulator resolve pools the same way.
struct PoolOffer {
  Offer offer;
  InstanceType type;
  CostOwner owner;  // {pool name, region, market}
};

// The catalog's market for an experiment pool's market (unspecified is on-demand).
Market PoolMarket(v1::Pool::Market market);

// Finds the pool's offer (region x instance x market) and its instance type. InvalidArgument
// naming the pool when the catalog sells no such offer.
absl::StatusOr<PoolOffer> ResolvePoolOffer(const Catalog& catalog, const v1::Pool& pool);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_COST_POOL_OFFER_H_
