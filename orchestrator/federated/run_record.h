#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_RUN_RECORD_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_RUN_RECORD_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "aggregator/federation_hub.h"
#include "aggregator/model_evaluation.h"
#include "common/clock.h"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/store.h"
#include "orchestrator/monitor/run_monitor.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// Where a federated run stands, for its record, its metrics and its last line.
struct RunStanding {
  int64_t last_round = 0;          // the last completed round
  int64_t published_round = -1;    // the round in progress, once published
  ModelScore score;                // the global model's, after last_round
  int preemptions = 0;             // the participants' spot preemptions
  std::optional<double> cost;      // compute and transfer, when the run is billed
  std::optional<double> transfer;  // of which the transfer between regions
  std::optional<double> epsilon;   // the privacy spent, with DP
  int clients = 0;                 // the client processes alive
  int64_t clients_per_round = 0;   // sampled in each round
};

// The rows of a completed round, `seconds` into the run: the global model's (its score, the
// updates aggregated, those turned away here and in every region, epsilon) and one per
// sending region (its clients' scores, updates and rejections, merged across its senders).
std::vector<RoundRow> RoundRows(int64_t round, const ModelScore& score, const RoundOutcome& outcome,
                                const std::vector<SenderReport>& senders,
                                std::optional<double> epsilon, double seconds);

// The federated run as the store, the live metrics and the console see it: trial 1 of the run,
// whose fidelity is rounds (so that results, status and a federated search read the run as one
// trial), and how the run ended, each end with its run state, its line and its status. The
// ends do not write the model: the caller writes the final model first. Not thread-safe.
class RunRecord {
 public:
  // spec, store, clock and out (not owned) must outlive the record. start: when the run began.
  RunRecord(const v1::ExperimentSpec& spec, Store* store, const Clock* clock, std::ostream* out,
            absl::Time start);

  // Stores trial 1 in `state`; COMPLETED takes the objective's value from the score (its loss
  // when the objective's metric names a loss, else its accuracy).
  void PutTrial(v1::TrialState state, const RunStanding& s);
  // The run as the live metrics show it: one trial whose fidelity is rounds; its workers the
  // client processes, busy while sampled for the round in progress. No-op without a monitor.
  void Publish(RunMonitor* monitor, const RunStanding& s) const;

  // The rounds begin (a resumed run's after s.last_round): the run's first line (its folder,
  // regions, clients, the model's parameters, the rounds to run), trial 1 RUNNING, and the
  // live metrics (monitor may be null).
  void Started(const std::string& run_dir, size_t parameters, const RunStanding& s,
               RunMonitor* monitor);
  // Says a completed round (its global row, RoundRows) as a "round" event and a console line,
  // with the clients that failed in it; a federated trial's line also carries its metrics at
  // this fidelity (rounds=, val_accuracy=, val_loss=) for its worker.
  void SayRound(const RoundRow& global, int64_t clients_failed, bool federated_trial);
  // Every round done: COMPLETED, with its final scores and what it spent. OK.
  absl::Status Completed(const RunStanding& s);
  // The run cannot go on: FAILED with why. Returns Aborted("the federated run failed: why"), and
  // the caller exits 1; the last completed round's model stays.
  absl::Status Failed(const std::string& why, const RunStanding& s);
  // The next round would pass the epsilon target (why): EPSILON_EXHAUSTED, ended normally. OK.
  absl::Status EpsilonReached(const std::string& why, const RunStanding& s);
  // A federated trial at its scheduler's rung: stopped after this round, resumable, and its
  // metrics said, so that the scheduler pauses it there. OK.
  absl::Status PausedAtRung(const RunStanding& s);
  // Stopped by a signal (INTERRUPTED: Cancelled) or a spent budget (BUDGET_EXHAUSTED: OK), with
  // the command that resumes run_dir.
  absl::Status Stopped(v1::RunState state, const RunStanding& s, const std::string& run_dir);

  // The run's times: seconds since it began, and an event's time (unix seconds, as every other
  // writer of the events table records it).
  double Seconds() const { return absl::ToDoubleSeconds(clock_->Now() - start_); }
  double EventTime() const { return absl::ToUnixMicros(clock_->Now()) / 1e6; }
  // Restarts the run's time at `start` (a resumed run began in its first session).
  void SetStart(absl::Time start) { start_ = start; }
  absl::Time start() const { return start_; }

 private:
  // The run's final state, its end time and its run_finished event (Store::EndRun).
  absl::Status RecordEnd(v1::RunState state, const std::string& why = "");
  // What the run spent, as metrics on its last line: " cost=D" and " epsilon=E" when they apply.
  static std::string SpentMetrics(const RunStanding& s);

  const v1::ExperimentSpec& spec_;
  Store* const store_;
  const Clock* const clock_;
  std::ostream* const out_;
  absl::Time start_;
  TrialRow trial_;  // as last stored
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_RUN_RECORD_H_
