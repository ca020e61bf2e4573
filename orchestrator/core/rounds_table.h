#ifndef SEXTANT_ORCHESTRATOR_CORE_ROUNDS_TABLE_H_
#define SEXTANT_ORCHESTRATOR_CORE_ROUNDS_TABLE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "orchestrator/core/sqlite_db.h"

namespace sextant {

// One row of the `rounds` table of a run's state.db: one global row (region "") and one row per
// region for each completed round (a buffered run: each server step).
struct RoundRow {
  int64_t round = 0;
  std::string region;  // "" for the global model
  // Global: the global model's score after the round (RoundMetricMeanings in
  // orchestrator/core/federated_results.h says by whom and on what data);
  // region: its clients' scores of the model they received at the start of the round, on their
  // own held-out data, before training, weighted by their examples. NaN (stored as NULL) for a
  // region that sat the round out (no clients).
  double accuracy = 0;
  double loss = 0;
  int64_t clients = 0;            // updates aggregated
  int64_t rejected = 0;           // updates turned away
  std::optional<double> epsilon;  // differential privacy spent; none without DP
  double time = 0;                // seconds since the run started, when the round closed
};

// The federated rounds of a run, in their own table of state.db (its own connection; SQLite
// serialises writers). The federated run writes it; `results` and `report` read it.
// Not thread-safe.
class RoundsTable {
 public:
  // Opens db_path for writing and creates the table when missing. Internal on SQLite errors.
  static absl::StatusOr<RoundsTable> Open(const std::string& db_path);
  // Opens db_path read-only (safe while the run is live) and creates nothing: a store without
  // the table (a search, or a run from before it) loads no rows. Internal on SQLite errors.
  static absl::StatusOr<RoundsTable> OpenReadOnly(const std::string& db_path);
  // Inserts or replaces (round, region) rows in one durable transaction. Internal on SQLite
  // errors (a table opened read-only refuses to write).
  absl::Status Put(const std::vector<RoundRow>& rows);
  // All rows by round and region; none when the table does not exist. A region stored as
  // "global" reads as "" (the global row).
  absl::StatusOr<std::vector<RoundRow>> Load();

 private:
  explicit RoundsTable(std::unique_ptr<SqliteDb> db) : db_(std::move(db)) {}
  std::unique_ptr<SqliteDb> db_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_ROUNDS_TABLE_H_
