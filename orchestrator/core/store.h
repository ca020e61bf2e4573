#ifndef SEXTANT_ORCHESTRATOR_CORE_STORE_H_
#define SEXTANT_ORCHESTRATOR_CORE_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/core/sqlite_db.h"
#include "sextant/v1/trial.pb.h"

namespace sextant {

// One row of the trials table.
// The name a trial state is stored, reported and shown under: "COMPLETED".
const std::string& TrialStateName(v1::TrialState state);
// COMPLETED, PRUNED or FAILED: the trial has ended and will not run again.
bool TrialEnded(v1::TrialState state);

struct TrialRow {
  int64_t id = 0;                      // 1-based, in creation order
  v1::TrialState state = v1::PENDING;  // stored and shown by name (TrialStateName)
  std::string params_json;             // {"name": value, ...}
  int attempts = 0;                    // times it was leased
  int failures = 0;                    // attempts that ended in a real failure
  std::optional<double> value;         // the objective, once COMPLETED
  std::string error;                   // why it FAILED
  double created_at = 0;               // unix seconds
  double finished_at = 0;              // 0 while not finished
  // Multi-fidelity search (all 0 or empty without a scheduler):
  double fidelity = 0;            // the highest fidelity reported
  double target = 0;              // the fidelity the current or last attempt runs to
  std::string rungs_json = "[]";  // [{"fidelity", "value", "decision"}], oldest first
  int scratch_restarts = 0;       // resumes that found no checkpoint and started over
  bool paused = false;            // PENDING while waiting for a promotion
  int preemptions = 0;            // attempts ended by a preemption notice (not failures)
  // Several objectives and constraints (stored as one JSON column, `outcome`):
  std::vector<double> values;      // each objective as reported, once COMPLETED (or PRUNED)
  bool feasible = true;            // every constraint held (false when a metric was missing)
  double seconds = 0;              // wall time of the trial's finished attempts
  std::vector<double> violations;  // each constraint's violation (<= 0 holds; +inf missing)
  std::optional<double> cost;      // its dollars when it finished (what the sampler saw)
};

// One stored measurement (a stdout line's metrics).
struct MeasurementRow {
  int64_t trial_id = 0;
  int attempt = 0;
  int64_t sequence = 0;
  double elapsed = 0;
  std::string metrics_json;  // {"loss": 0.4, "bad": "nan"}: non-finite values as strings
};

// One telemetry sample from a worker's heartbeat (the trial's processes, or its GPUs).
struct TelemetryRow {
  double time = 0;  // unix seconds
  int64_t worker_id = 0;
  int64_t trial_id = 0;    // 0 when idle
  double cpu_percent = 0;  // of one core, summed over the trial's processes
  int64_t rss_bytes = 0;
  int gpu_count = 0;           // 0: no GPU
  double gpu_utilization = 0;  // percent, averaged over the worker's GPUs
  int64_t gpu_memory_bytes = 0;
  int64_t gpu_memory_total_bytes = 0;
};

// One row of the attempts table.
struct AttemptRow {
  int64_t trial_id = 0;
  int attempt = 0;
  int64_t worker_id = 0;
  double started_at = 0;
  std::optional<double> finished_at;                             // unset while the attempt runs
  v1::AttemptOutcome outcome = v1::ATTEMPT_OUTCOME_UNSPECIFIED;  // UNSPECIFIED while it runs
  int exit_code = 0;
  std::string error;
};

struct EventRow {
  int64_t id = 0;
  double time = 0;
  std::string kind;
  int64_t trial_id = 0;  // 0 when not about a trial
  std::string message;
};

// One row of the cost ledger as stored: an instance's or a reservation's whole bill, or the
// cost attributed to a trial (the seconds it ran times its instance's rate).
struct CostRow {
  std::string kind;    // "instance" | "reservation" | "trial" | "transfer"
  int64_t ref = 0;     // the instance, reservation or trial id; a transfer's bytes
  std::string pool;    // empty for "trial"
  std::string region;  // empty for "trial"
  std::string market;  // spot | on_demand | reserved; empty for "trial"
  double start = 0;    // seconds since the run started
  double end = 0;
  double cost = 0;
};

// The run's durable state: SQLite in WAL mode with synchronous=FULL, so a committed
// transaction survives a crash or power cut. A caller groups a state change in
// Begin()/Commit() and acknowledges it only after Commit() returns OK.
// Not thread-safe: the orchestrator owns one Store on its run core's lock; readers
// (`sextant status`, `results`) open their own read-only Store.
// The name a run state is stored, reported and shown under: "COMPLETED" ("UNKNOWN" for
// RUN_STATE_UNSPECIFIED).
const std::string& RunStateName(v1::RunState state);
// The state a stored name (RunStateName) stands for; RUN_STATE_UNSPECIFIED for anything else.
v1::RunState ParseRunState(absl::string_view name);
// The name an attempt's outcome is stored, reported and shown under: "COMPLETED", "lost" for
// ATTEMPT_LOST, "" for ATTEMPT_OUTCOME_UNSPECIFIED (the attempt runs).
const std::string& AttemptOutcomeName(v1::AttemptOutcome outcome);
// The outcome a stored name (AttemptOutcomeName) stands for; ATTEMPT_OUTCOME_UNSPECIFIED for ""
// and anything else.
v1::AttemptOutcome ParseAttemptOutcome(absl::string_view name);

class Store {
 public:
  // Opens (creating when create is true) the database at path and its schema.
  // Returns NotFound when it does not exist and create is false, or Internal on SQLite errors.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path, bool create,
                                                     bool read_only = false);

  // Replaces everything in `dest` with this store's contents (SQLite's online backup): e.g. a
  // simulation run in memory, written to its run directory in one step. Neither store may be
  // in a transaction. Internal on SQLite errors.
  absl::Status CopyTo(Store* dest);

  absl::Status Begin();
  absl::Status Commit();  // durable on return (fsync of the WAL)
  void Rollback();
  // True between Begin() and Commit() or Rollback().
  bool InTransaction() const;

  absl::Status PutMeta(const std::string& key, const std::string& value);
  // Returns nullopt when key is absent.
  absl::StatusOr<std::optional<std::string>> GetMeta(const std::string& key);
  // The run's state (meta "state", by RunStateName): the one place it is written and read.
  absl::Status SetRunState(v1::RunState state);
  // RUN_STATE_UNSPECIFIED when none is recorded.
  absl::StatusOr<v1::RunState> GetRunState();
  // The run's end: its state, "finished_at" and a run_finished event ("STATE" or "STATE: why")
  // at `time`. Group it in a transaction with what else the end changes.
  absl::Status EndRun(v1::RunState state, double time, const std::string& why = "");
  // The run's times ("started_at", "finished_at"), in unix seconds exact to the microsecond.
  absl::Status PutTimeMeta(const std::string& key, double unix_seconds);
  // Returns nullopt when key is absent. A time that older versions wrote with 6 significant
  // digits (a resolution of 1,000 s) is derived anew from the records, as RepairTimes does.
  absl::StatusOr<std::optional<double>> GetTimeMeta(const std::string& key);

  // Inserts or replaces the whole row.
  absl::Status PutTrial(const TrialRow& trial);
  absl::StatusOr<std::vector<TrialRow>> LoadTrials();

  // Records the start and the end of an attempt; the outcome is stored by AttemptOutcomeName.
  absl::Status StartAttempt(int64_t trial_id, int attempt, int64_t worker_id, double time);
  absl::Status FinishAttempt(int64_t trial_id, int attempt, v1::AttemptOutcome outcome,
                             int exit_code, const std::string& error, double time);
  // The attempt's row; nullopt when it was never started.
  absl::StatusOr<std::optional<AttemptRow>> LoadAttempt(int64_t trial_id, int attempt);

  // Inserts a measurement unless (trial_id, attempt, sequence) is already stored.
  // Returns true when inserted, false when it was a duplicate.
  absl::StatusOr<bool> AddMeasurement(const MeasurementRow& m);
  // All measurements of a trial (all trials when trial_id is 0), by trial, attempt, sequence.
  absl::StatusOr<std::vector<MeasurementRow>> LoadMeasurements(int64_t trial_id = 0);

  absl::Status AddEvent(double time, const std::string& kind, int64_t trial_id,
                        const std::string& message);
  // Events with id > after_id, oldest first, at most limit (0: all).
  absl::StatusOr<std::vector<EventRow>> LoadEvents(int64_t after_id = 0, int limit = 0);

  absl::Status AddWorker(int64_t id, const std::string& region, const std::string& pool,
                         const std::string& hostname, int64_t pid, double time);
  absl::Status AddTelemetry(const TelemetryRow& t);
  // All samples by worker and time, or only each worker's latest when latest_only.
  absl::StatusOr<std::vector<TelemetryRow>> LoadTelemetry(bool latest_only);
  // Cost rows (written by `sextant simulate` and the cost ledger); all of them, in order.
  // A store created before the costs table existed holds none (read-only opens see an error).
  // The run's cost rows become rows, in their order, in one transaction (or the caller's):
  // the live ledger rewrites its rows as they grow.
  absl::Status ReplaceCosts(const std::vector<CostRow>& rows);
  absl::StatusOr<std::vector<CostRow>> LoadCosts();
  // The largest worker id stored (0 when none), so that ids stay unique across resumes.
  absl::StatusOr<int64_t> MaxWorkerId();

 private:
  explicit Store(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}
  std::unique_ptr<SqliteDb> db_;
  bool has_outcome_ = true;  // the trials table has the `outcome` column
};

// Runs f() (returning a Status or StatusOr) in one transaction of store: committed when it
// succeeds, rolled back when it fails. Inside a transaction the caller opened (ask/tell records
// its lease with the change), f() joins it and the caller commits or rolls back both.
template <typename F>
auto WithinTransaction(Store* store, F&& f) -> decltype(f()) {
  if (store->InTransaction()) return f();
  if (absl::Status begun = store->Begin(); !begun.ok()) return begun;
  auto result = f();
  if (!result.ok()) {
    store->Rollback();
    return result;
  }
  if (absl::Status committed = store->Commit(); !committed.ok()) return committed;
  return result;
}

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_STORE_H_
