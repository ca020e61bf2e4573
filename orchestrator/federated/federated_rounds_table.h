#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATED_ROUNDS_TABLE_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATED_ROUNDS_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;

namespace sextant {

// One row of the `rounds` table of a run's state.db.
struct RoundRow {
  int64_t round = 0;
  std::string region;   // "" for the global model
  double accuracy = 0;  // global: validation accuracy; region: its clients' held-out
  double loss = 0;
  int64_t clients = 0;            // updates aggregated
  int64_t rejected = 0;           // updates turned away
  std::optional<double> epsilon;  // differential privacy spent; none without DP
  double time = 0;                // seconds since the run started
};

// The federated rounds of a run, in their own table of state.db (its own connection; SQLite
// serialises writers). Not thread-safe.
class RoundsTable {
 public:
  // Opens db_path and creates the table when missing. Internal on SQLite errors.
  static absl::StatusOr<RoundsTable> Open(const std::string& db_path);
  RoundsTable(RoundsTable&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  ~RoundsTable();
  // Inserts or replaces (round, region) rows in one durable transaction.
  absl::Status Put(const std::vector<RoundRow>& rows);
  // All rows by round and region.
  absl::StatusOr<std::vector<RoundRow>> Load();

 private:
  explicit RoundsTable(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATED_ROUNDS_TABLE_H_
