#ifndef SEXTANT_ORCHESTRATOR_REPORT_REPORT_DATA_H_
#define SEXTANT_ORCHESTRATOR_REPORT_REPORT_DATA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/warm_start.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// One row of the attempts table: which worker ran which trial, and when.
struct AttemptRecord {
  int64_t trial_id = 0;
  int attempt = 0;
  int64_t worker_id = 0;
  double started_at = 0;
  std::optional<double> finished_at;  // unset while running (or lost when the run died)
  v1::AttemptOutcome outcome = v1::ATTEMPT_OUTCOME_UNSPECIFIED;  // UNSPECIFIED while running
};

struct WorkerRecord {
  int64_t id = 0;
  std::string region, pool, hostname;
  double registered_at = 0;
};

// Tables that later parts of the store may add. The report reads them when sqlite_master has
// them and draws a "no data recorded" panel otherwise. Columns are found by name, so extra
// columns do no harm. The expected shapes:
//   costs(kind TEXT, pool TEXT, start REAL, end REAL, cost REAL)   the cost ledger: kind
//        instance | reservation | trial, start/end in seconds since the run started; an
//        instance's bill accrues evenly over [start, end], a reservation is paid at its start,
//        trial rows attribute cost to trials and are not added again
//        (also accepted: costs(time REAL unix seconds, pool TEXT, amount REAL), one charge each)
//   telemetry(time REAL, worker_id INTEGER, trial_id INTEGER, cpu_percent REAL,
//             gpu_count INTEGER, gpu_utilization REAL, ...)   percentages; gpu_count 0 = no GPU
//   rounds   a federated run's rounds, read by RoundsTable (orchestrator/core/rounds_table.h), as
//            `results` reads them; the global row's clients and rejected are the round's
//            totals (the regional rows are its parts)
struct CostRecord {
  double start = 0, end = 0;  // seconds since the run started; the charge accrues in between
  std::string pool;
  double amount = 0;
};

struct TelemetryRecord {
  double time = 0;
  int64_t worker_id = 0;
  std::optional<double> gpu_util;  // [0, 1]; unset when the worker has no GPU
  std::optional<double> cpu_util;  // cores busy, [0, inf)
};

// Everything a report draws, read from a run directory without writing to it.
struct ReportData {
  std::string run_dir;
  v1::ExperimentSpec spec;
  nlohmann::json results;  // LoadResults(run_dir): the summary uses exactly these numbers
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;  // the run's stored state
  bool in_progress = false;                        // another process holds the run directory's lock
  double started_at = 0;    // unix seconds: the run's start (its first record when unknown)
  double generated_at = 0;  // unix seconds: when the report was made
  std::vector<TrialRow> trials;
  std::vector<MeasurementRow> measurements;
  std::vector<EventRow> events;
  std::vector<AttemptRecord> attempts;
  std::vector<WorkerRecord> workers;
  std::vector<std::string> tables;  // the store's table names
  std::vector<CostRecord> costs;
  std::vector<TelemetryRecord> telemetry;
  std::vector<RoundRow> rounds;
  std::optional<WarmStart> warm_start;  // search.warm_start's priors, when the run had them
  std::vector<std::string> notes;       // tables present but unreadable, and similar
};

// Reads a run directory for a report, read-only (safe while the run is live). Returns
// NotFound when run_dir does not exist or is not a Sextant run directory (no state.db, or no
// experiment in it), Internal on SQLite errors. now stamps the report and ends the bars of
// attempts still running.
absl::StatusOr<ReportData> LoadReportData(const std::string& run_dir, absl::Time now);

// True when a process holds the run directory's lock (a run or resume is live). Probes with a
// shared non-blocking flock that is released at once.
bool RunDirIsLocked(const std::string& run_dir);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_REPORT_REPORT_DATA_H_
