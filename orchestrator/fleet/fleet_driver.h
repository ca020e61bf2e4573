// What a pool run does with its fleet each round, in one place for `sextant run` and
// `sextant simulate`: the fleet reads the dispatcher's demand and workers, and its decisions
// (hold, retired and lost workers, events, bills) go back to the dispatcher and the store.
#ifndef SEXTANT_ORCHESTRATOR_FLEET_FLEET_DRIVER_H_
#define SEXTANT_ORCHESTRATOR_FLEET_FLEET_DRIVER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/run_core.h"
#include "orchestrator/core/store.h"
#include "orchestrator/fleet/fleet.h"

namespace sextant {

struct FleetDriverOptions {
  // The bills are rewritten in the store after every round with events and at least this often
  // otherwise. Default 1 s; InfiniteDuration: only by WriteCosts() (a simulation writes them
  // once, at the end, since each write is linear in the bills).
  absl::Duration cost_write_period = absl::Seconds(1);
};

// A run's pools as its RunCore drives them: one Fleet for one Dispatcher over one Store. Not
// thread-safe: the core calls it under its lock. fleet, store and clock are not owned and must
// outlive the driver.
class FleetDriver final : public Pools {
 public:
  FleetDriver(Fleet* fleet, Store* store, const Clock* clock, FleetDriverOptions options = {});

  // Gives the dispatcher the fleet's rules: the pools the top rung keeps off, each trial's
  // cost (the built-in metric `cost`) and the committed spend (cost_aware sampling).
  void Connect(Dispatcher& d) override;

  // One round: ticks the fleet on the dispatcher's view, holds or releases the dispatcher,
  // retires workers whose instances go, requeues the trials of workers whose instances are
  // gone, and stores the round's events (and the bills, see options) in one transaction.
  // An error from the store is returned with the transaction rolled back.
  absl::StatusOr<PoolsRound> Round(Dispatcher& d) override;

  // Rewrites the store's cost rows and fleet counters from the ledger, in a transaction.
  absl::Status WriteCosts() override;

  void NoticeAll() override { fleet_->NoticeAll(); }
  void TerminateAll() override { fleet_->TerminateAll(); }
  int Reap(bool force) override { return fleet_->Reap(force); }
  std::set<int64_t> LiveWorkers() const override { return fleet_->LiveWorkers(); }
  double committed() const override { return fleet_->committed(); }

 private:
  Fleet* fleet_;
  Store* store_;
  const Clock* clock_;
  FleetDriverOptions options_;
  absl::Time last_cost_write_ = absl::InfinitePast();
  int64_t last_worker_ = 0;  // the largest worker id handed to the fleet
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FLEET_FLEET_DRIVER_H_
