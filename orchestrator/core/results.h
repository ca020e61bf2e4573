#ifndef SEXTANT_ORCHESTRATOR_CORE_RESULTS_H_
#define SEXTANT_ORCHESTRATOR_CORE_RESULTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/store.h"

namespace sextant {

// Reads a run directory's store (read-only; safe while the run is live) and returns the
// results document of the contract:
//   {"experiment", "state", "objective": {"metric", "goal"}, "best": {...} | null,
//    "trials": [{"id", "state", "params", "value", "metrics", "fidelity", "attempts", "cost",
//                "preemptions", "error"}], "cost": {"total", "currency", "by_pool"},
//    "preemptions": {"total", "by_trial": {"ID": n}, "by_pool": {"POOL": n}},
//    "warm_start": {"observations", "from": [run dirs], "dropped"}   (only with search.warm_start),
//    "federation": {...}, "rounds": [...]   (a federated run: AddFederatedRounds in
//                                            orchestrator/core/federated_results.h)}
// A trial's preemptions are the attempts a preemption notice ended; a pool's are the trials
// running on its instances when the market took them back (live fleet or simulation).
// metrics hold the last value of each metric reported; non-finite values appear as the strings
// "nan", "inf" and "-inf". A federated search has "federation": {"description"}, and each
// trial whose federated run has started has that run's "rounds". NotFound when dir is not a
// Sextant run directory.
absl::StatusOr<nlohmann::json> LoadResults(const std::string& run_dir);

// The results document as CSV: one row per trial, with a column per parameter and per metric;
// for a federated run (the document has "rounds"), one row per round and region instead
// (FederatedRoundsToCsv).
std::string ResultsToCsv(const nlohmann::json& results);

// One line per worker from its latest heartbeat sample: the trial it runs, CPU and memory of
// the trial's processes, and GPU utilisation and memory when it has GPUs. Empty when no
// telemetry was recorded. `now` (unix seconds) dates the samples. With `ended` (why no
// worker runs now, e.g. "the run has ended: COMPLETED"), the samples are history: the header
// says "workers: none running (ENDED); their last heartbeats:" and no line names a trial.
std::string TelemetryTable(const std::vector<TelemetryRow>& latest, double now,
                           const std::string& ended = "");

// A table for people: a summary line, the best trial, and up to max_rows trials (best first
// among COMPLETED, then the rest by id). 0 means all rows. A federated run: what it is, its final
// score and its newest max_rows rounds (FederatedRoundsToTable) instead of the trials.
// When rows are left out, the last line says how many and that `sextant results RUN_DIR` shows
// them all, naming run_dir (or the placeholder DIR when run_dir is empty).
std::string ResultsToTable(const nlohmann::json& results, int max_rows = 0,
                           const std::string& run_dir = "");

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_RESULTS_H_
