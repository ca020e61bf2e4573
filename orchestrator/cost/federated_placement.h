#ifndef SEXTANT_ORCHESTRATOR_COST_FEDERATED_PLACEMENT_H_
#define SEXTANT_ORCHESTRATOR_COST_FEDERATED_PLACEMENT_H_

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/pool_offer.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// Where a plain federated run's participants run and what moving its bytes costs: each
// region's clients, and its aggregator, on the pool of that region (pool.region is the
// region's name) whose `hosts` allows them and whose first billing increment is cheapest; the
// global tier in federation.global_region (default the first region; `internet` for an
// orchestrator outside every region). A plain value.
class FederatedPlacement {
 public:
  // InvalidArgument naming the region when one has no pool for its clients or its aggregator,
  // an unknown global region, or a region whose transfer to it the catalog does not price
  // (the loader reports the same with positions).
  static absl::StatusOr<FederatedPlacement> Create(const v1::ExperimentSpec& spec,
                                                   const Catalog& catalog);

  // The pool that hosts `region`'s clients (aggregator false) or its aggregator. The region
  // must be one of the federation's.
  const PoolOffer& For(const std::string& region, bool aggregator) const;
  // Any pool of resources.pools by name (its offer resolved), or null.
  const PoolOffer* Pool(const std::string& name) const {
    auto it = pools_.find(name);
    return it == pools_.end() ? nullptr : &it->second;
  }
  const std::string& global_region() const { return global_; }
  // Dollars per byte between a region and the global region: `down` from the global tier to
  // the region (the model), `up` from the region to it (its aggregate).
  struct TransferPrice {
    double down = 0;
    double up = 0;
  };
  // `region`'s prices; nullopt for a name that is not one of the federation's regions.
  std::optional<TransferPrice> TransferPerByte(const std::string& region) const {
    auto it = per_byte_.find(region);
    return it == per_byte_.end() ? std::nullopt : std::optional<TransferPrice>(it->second);
  }
  // Dollars of every participant's first billing increment (the minimum) together: what
  // starting the federation costs at least, before any round.
  double FirstIncrements() const { return first_increments_; }
  // The instances one run of the federation holds on each pool it uses (its clients and
  // aggregators there), by pool name.
  const std::map<std::string, int64_t>& instances() const { return instances_; }

 private:
  std::map<std::string, PoolOffer> clients_, aggregators_;  // by region
  std::map<std::string, PoolOffer> pools_;                  // every pool, by name
  std::map<std::string, TransferPrice> per_byte_;
  std::string global_;
  double first_increments_ = 0;
  std::map<std::string, int64_t> instances_;
};

// How many federated trials of `spec` (a federated search on pools) fit on its pools at once:
// max_concurrent, or fewer when some pool's max_instances cannot hold that many trials'
// participants (placement.instances() each). At least 0; 0 when one trial does not fit.
int FederatedTrialsAtOnce(const v1::ExperimentSpec& spec, const FederatedPlacement& placement);

// True when `pool` may host a region's aggregator (aggregator) or its clients: its `hosts` is
// `any` (or unset) or names that role.
inline bool PoolHosts(const v1::Pool& pool, bool aggregator) {
  return pool.hosts() != (aggregator ? "clients" : "aggregator");
}

// Where `pool`'s instances run: its own provider, else `resources.provider`.
inline const std::string& PoolProvider(const v1::Resources& resources, const v1::Pool& pool) {
  return pool.provider().empty() ? resources.provider() : pool.provider();
}

// Why `region`'s transfer to the global region (`global`, maybe kInternet) has no price, and
// which catalog key would give it one.
std::string MissingTransferPrice(const std::string& global, const std::string& region);

// The seed of a federated run's spot market for a session that starts after `last_round` (0
// for a new run): each spot participant's interruption is drawn from it in launch order (every
// region's aggregator, then every region's clients; a replacement when it starts). A new run
// draws what `sextant simulate` draws; a resumed one draws afresh.
uint64_t SpotMarketSeed(const v1::Federation& federation, int64_t last_round);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_COST_FEDERATED_PLACEMENT_H_
