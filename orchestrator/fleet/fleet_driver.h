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
#include "orchestrator/core/store.h"
#include "orchestrator/fleet/fleet.h"

namespace sextant {

struct FleetDriverOptions {
  // The bills are rewritten in the store after every round with events and at least this often
  // otherwise. Default 1 s; InfiniteDuration: only by WriteCosts() (a simulation writes them
  // once, at the end, since each write is linear in the bills).
  absl::Duration cost_write_period = absl::Seconds(1);
};

// How a round left the run.
struct FleetRoundResult {
  bool exhausted = false;  // the budget is spent: the run must wind down
  Fleet::StuckOn stuck_on = Fleet::StuckOn::kNone;  // whether waiting work can never run
  std::string stuck;                                // why, in words; empty when it can
};

// Drives one Fleet for one Dispatcher over one Store. Not thread-safe: call it under the
// dispatch lock. fleet, store and clock are not owned and must outlive the driver.
class FleetDriver {
 public:
  FleetDriver(Fleet* fleet, Store* store, const Clock* clock, FleetDriverOptions options = {});

  // Gives the dispatcher the fleet's rules: the pools the top rung keeps off, each trial's
  // cost (the built-in metric `cost`) and the committed spend (cost_aware sampling).
  void Connect(Dispatcher& d) const;

  // One round: ticks the fleet on the dispatcher's view, holds or releases the dispatcher,
  // retires workers whose instances go, requeues the trials of workers whose instances are
  // gone, and stores the round's events (and the bills, see options) in one transaction.
  // An error from the store is returned with the transaction rolled back.
  absl::StatusOr<FleetRoundResult> Round(Dispatcher& d);

  // Rewrites the store's cost rows and fleet counters from the ledger, in a transaction.
  absl::Status WriteCosts();

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
