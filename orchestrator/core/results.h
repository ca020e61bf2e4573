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
//    "warm_start": {"observations", "from": [run dirs], "dropped"}   (only with search.warm_start)}
// A trial's preemptions are the attempts a preemption notice ended; a pool's are the trials
// running on its instances when the market took them back (live fleet or simulation).
// metrics hold the last value of each metric reported; non-finite values appear as the strings
// "nan", "inf" and "-inf". NotFound when dir is not a Sextant run directory.
absl::StatusOr<nlohmann::json> LoadResults(const std::string& run_dir);

// The results document as CSV: one row per trial, with a column per parameter and per metric.
std::string ResultsToCsv(const nlohmann::json& results);

// A table for people: a summary line, the best trial, and up to max_rows trials (best first
// among COMPLETED, then the rest by id). 0 means all rows.
// One line per worker from its latest heartbeat sample: the trial it runs, CPU and memory of
// the trial's processes, and GPU utilisation and memory when it has GPUs. Empty when no
// telemetry was recorded. `now` (unix seconds) dates the samples.
std::string TelemetryTable(const std::vector<TelemetryRow>& latest, double now);

std::string ResultsToTable(const nlohmann::json& results, int max_rows = 0);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_RESULTS_H_
