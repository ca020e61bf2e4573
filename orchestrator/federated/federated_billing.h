#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATED_BILLING_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATED_BILLING_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "aggregator/transfer_meter.h"
#include "common/clock.h"
#include "orchestrator/core/store.h"
#include "orchestrator/cost/federated_placement.h"
#include "orchestrator/cost/ledger.h"

namespace sextant {

// What a plain federated run costs, in the cost rows `results` and the report read: every
// participant's instance billed per second on the Ledger (on-demand, spot or reserved rates of
// its pool) from the start of its process to its end, and the bytes each region moved to and
// from the global tier billed at the catalog's transfer price between that region and the
// global region. It closes each round's bill and projects the next one for the budget. Not
// thread-safe; runs on the run's loop.
class FederatedBilling {
 public:
  // clock is not owned and must outlive it. run_start is the run's time origin (its first
  // session's start), shared with the rounds table. prior: the cost rows of the run's earlier
  // sessions, kept and counted.
  FederatedBilling(FederatedPlacement placement, const Clock* clock, absl::Time run_start,
                   std::vector<CostRow> prior);

  // A participant's process started: its instance (its region's client or aggregator pool) is
  // billed from now. Returns the id to stop it with.
  int64_t Start(const std::string& region, bool aggregator);
  // The same on a pool of the run named outright (a participant started by hand names its own).
  int64_t StartOn(const PoolOffer& pool);
  const FederatedPlacement& placement() const { return placement_; }
  // Its process ended: billing stops now. Unknown or stopped ids are ignored.
  void Stop(int64_t id);
  void StopAll();

  // Bills what each region moved since the last call, given the global tier's running totals
  // by sender id (a region's aggregator sends as its region's name; other ids are ignored).
  void MeterTransfer(const std::map<std::string, TransferMeter::Bytes>& totals);

  // Dollars owed now: earlier sessions, instances as if they stopped now, transfer.
  double Committed() const;
  // Of those, transfer (earlier sessions' included).
  double transfer() const { return transfer_; }
  // Ends a round's bill: what was committed since the previous round closed (or billing
  // began). Returns it.
  double CloseRound();
  // The rounds begin now: the first round's length, which the projection goes by, is counted
  // from here, not from the start of billing (the participants' start-up is paid in round 1's
  // bill, but no later round takes that long). Call once the participants are up.
  void RoundsBegin() { closed_time_ = clock_->Now(); }
  // What one more round is expected to add: every live instance kept as long as the longest
  // of the last three rounds and `then` more (the wind-down after it; whole billing
  // increments, a minimum already paid counting as paid), plus the most transfer of those
  // rounds. 0 before a round has closed.
  double NextRoundProjection(absl::Duration then = absl::ZeroDuration()) const;
  // What keeping every live instance `longer` adds (whole billing increments, a minimum
  // already paid counting as paid): the wind-down after a stop, say.
  double KeepingCost(absl::Duration longer) const;
  // True once a round has closed in this session (NextRoundProjection has a round to go by).
  bool projects() const { return !last_rounds_.empty(); }

  // The cost rows to store: the earlier sessions', then one "instance" row per participant
  // instance and one "transfer" row (pool "transfer") per region and metering.
  std::vector<CostRow> Rows() const;

 private:
  double Seconds(absl::Time t) const { return absl::ToDoubleSeconds(t - run_start_); }

  FederatedPlacement placement_;
  const Clock* clock_;
  absl::Time run_start_;
  double ledger_offset_;  // the ledger's epoch, in seconds since run_start
  Ledger ledger_;
  std::vector<CostRow> prior_, transfers_;
  double prior_total_ = 0;                  // earlier sessions' instances and reservations
  double transfer_ = 0;                     // every session's
  std::map<std::string, TransferMeter::Bytes> metered_;  // bytes already billed, by region
  std::map<int64_t, bool> live_;            // ledger id -> billing
  double closed_at_ = 0;                    // Committed() when the last round closed
  absl::Time closed_time_;                  // when it closed (or billing began)
  double closed_transfer_ = 0;              // transfer_ then
  struct ClosedRound {
    double seconds = 0;   // from the previous close
    double transfer = 0;  // dollars
  };
  std::deque<ClosedRound> last_rounds_;  // the last three
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATED_BILLING_H_
