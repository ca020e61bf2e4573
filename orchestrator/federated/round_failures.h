#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_ROUND_FAILURES_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_ROUND_FAILURES_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "aggregator/federation_hub.h"
#include "common/clock.h"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/store.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// What goes wrong in a federated run's rounds, said as it happens: each failure a participant
// reports (a console line and an event, with its cause), a round that waits past its deadline
// for too few updates (said once), and the rounds that close with fewer than min_clients
// updates, counted in a row against federation.max_failed_rounds, and the regions that sit a
// round out. Not thread-safe; the run's
// loop owns it.
class RoundFailures {
 public:
  // Nothing is owned; everything must outlive it. Events are stamped on clock's time.
  RoundFailures(const v1::Federation& fed, Store* store, std::ostream* out, const Clock* clock)
      : fed_(fed), store_(store), out_(out), clock_(clock) {}

  // Says each of `reports` (the tier's failures since the last call), and, once per round, that
  // the open round (`progress`, later than `last_round`, the last completed one) is past its
  // deadline with fewer than min_clients updates and still waits.
  void Show(const std::vector<FailureReport>& reports, const RoundProgress& progress,
            int64_t last_round);
  // Whether the open round `round` has waited, since Show said its deadline had passed with too
  // few updates, for 10 times round_deadline (at least 5 minutes): then it stops waiting and
  // closes with what it has (a failed round), so that regions that never answer (an aggregator
  // cut off from this tier, or hung) cannot hold the run for ever. Says so once. Never under
  // hide_region_sums, whose secure round ends by its own stage timeouts.
  bool GiveUp(int64_t round);
  // Round `round` closed with `count` client updates, fewer than min_clients: says so, with the
  // failures of the round. The model stays as it was. Returns why the run must fail once
  // max_failed_rounds rounds in a row have, else nullopt (the next round goes on).
  std::optional<std::string> RoundFailed(int64_t round, int64_t count, const std::string& logs_dir);
  // A round completed: the count in a row and the round's failures start again.
  void RoundCompleted();
  // Round `round` of a synchronous plaintext run completed without the regions whose aggregate
  // did not come (an aggregator preempted or failed, its replacement not yet in): each sat the
  // round out, with a row of no clients and no scores added to `rows` (results: "sat_out", at
  // `seconds` into the run), an event and a console line. No-op for buffered rounds and under
  // hide_region_sums, whose rounds have no per-region rows.
  void RecordRegionsSittingOut(int64_t round, double seconds, std::vector<RoundRow>& rows);

  // Clients that failed in the round under way.
  int64_t clients_failed() const { return clients_failed_; }
  // Synchronous rounds that failed since the last completed one.
  int failed_in_a_row() const { return failed_in_a_row_; }
  // The last client's (or else region's) failure, one line; empty when none.
  const std::string& last_failure() const { return last_failure_; }

 private:
  int MaxFailedRounds() const;  // federation.max_failed_rounds as it holds (default 3)
  double EventTime() const;

  const v1::Federation& fed_;
  Store* store_;
  std::ostream* out_;
  const Clock* clock_;
  int failed_in_a_row_ = 0;
  int64_t clients_failed_ = 0;  // client failures reported since the last round ended
  int64_t regions_failed_ = 0;
  std::string last_failure_;
  int64_t deadline_said_ = -1;  // the round whose passed deadline was said, and when
  absl::Time deadline_said_at_;
  int64_t given_up_ = -1;  // the round GiveUp said it stopped waiting for
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_ROUND_FAILURES_H_
