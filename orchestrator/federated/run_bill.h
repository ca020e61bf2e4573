#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_RUN_BILL_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_RUN_BILL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "orchestrator/core/fleet_meta.h"
#include "orchestrator/core/store.h"
#include "orchestrator/federated/federated_billing.h"
#include "orchestrator/federated/hand_joins.h"
#include "orchestrator/federated/participants.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// How long participants take to exit once the run is over, as the budget counts it: each live
// instance is billed that much after the last round (measured: under 1 s on loopback,
// bench/federated/cost/budget_bench.py).
inline constexpr absl::Duration kParticipantWindDown = absl::Seconds(2);

// What a plain federated run on pools owes as it goes, and its budget.max_cost: the bill
// (FederatedBilling) over the experiment's catalog after the earlier sessions' costs, the cost
// rows and the pools' counters (meta "fleet", as a search's fleet writes it) stored after every
// round, each round's bill as a `round_cost` event, and the cap checked before each round and
// while one runs. Without pools there is nothing to bill: every call is a no-op. Not
// thread-safe; runs on the run's loop.
class RunBill {
 public:
  // Nothing is owned; everything must outlive it. `hand_joins` counts the participants
  // joined by hand, by pool.
  RunBill(const v1::ExperimentSpec& spec, Store* store, const Clock* clock,
          const HandJoins* hand_joins)
      : spec_(spec), store_(store), clock_(clock), hand_joins_(hand_joins) {}

  // Bills from now on, the run having started at `run_start`; `participants` (not owned)
  // counts the instances the run launched and the market took back, by pool. No-op without
  // pools.
  absl::Status Start(absl::Time run_start, const Participants* participants);
  // The bill once started with pools; else null.
  FederatedBilling* billing() { return billing_ ? &*billing_ : nullptr; }
  const FederatedBilling* billing() const { return billing_ ? &*billing_ : nullptr; }

  // Rewrites the store's cost rows and meta "fleet" from the bill, in one transaction.
  absl::Status Write();
  // Closes round `round`'s bill: its dollars (and what was projected for it) as an event at
  // `event_time`, then Write.
  absl::Status CloseRound(int64_t round, double event_time);
  // Before round `round`: ResourceExhausted (with why), said on `out` and as a
  // `budget_exhausted` event, when the dollars committed and the round's projection with the
  // wind-down after it would pass max_cost; the model kept is `last_round`'s.
  absl::Status CheckBefore(int64_t round, int64_t last_round, double event_time, std::ostream& out);
  // While round `running` runs (start-up, or a round that runs long, whose dollars the check
  // before it could not see coming): true, said as CheckBefore says it, once the dollars owed
  // and the wind-down reach max_cost.
  bool Reached(int64_t running, int64_t last_round, double event_time, std::ostream& out);
  // The participants' instances the market took back, in every session.
  int Preemptions() const;

 private:
  std::string FleetMetaJson() const;

  const v1::ExperimentSpec& spec_;
  Store* store_;
  const Clock* clock_;
  const Participants* participants_ = nullptr;  // from Start on
  const HandJoins* hand_joins_;
  std::optional<FederatedBilling> billing_;
  std::map<std::string, FleetPoolStats> prior_pools_;  // earlier sessions' (meta "fleet")
  std::optional<double> projected_;  // the cost projected for the round in progress
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_RUN_BILL_H_
