#include "orchestrator/core/rounds_table.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace sextant {
namespace {

// A score that is not a number (a region that sat the round out) is stored as NULL, and read
// back as NaN.
std::optional<double> Score(double v) {
  return std::isnan(v) ? std::nullopt : std::optional<double>(v);
}
double Score(const std::optional<double>& v) {
  return v ? *v : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

absl::StatusOr<RoundsTable> RoundsTable::Open(const std::string& db_path) {
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db,
                           SqliteDb::Open(db_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                          /*busy_timeout_ms=*/10000));
  SEXTANT_RETURN_IF_ERROR(
      db->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
               "CREATE TABLE IF NOT EXISTS rounds (round INTEGER NOT NULL, region TEXT NOT NULL,"
               " accuracy REAL, loss REAL, clients INTEGER, rejected INTEGER, epsilon REAL NULL,"
               " time REAL, PRIMARY KEY (round, region));"));
  return RoundsTable(std::move(db));
}

absl::StatusOr<RoundsTable> RoundsTable::OpenReadOnly(const std::string& db_path) {
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db,
                           SqliteDb::Open(db_path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
                                          /*busy_timeout_ms=*/10000));
  return RoundsTable(std::move(db));
}

absl::Status RoundsTable::Put(const std::vector<RoundRow>& rows) {
  SEXTANT_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
  for (const RoundRow& r : rows) {
    absl::Status s = db_->Run("insert a round",
                              "INSERT OR REPLACE INTO rounds (round, region, accuracy, loss,"
                              " clients, rejected, epsilon, time) VALUES (?,?,?,?,?,?,?,?)",
                              r.round, r.region, Score(r.accuracy), Score(r.loss), r.clients,
                              r.rejected, r.epsilon, r.time);
    if (!s.ok()) {
      (void)db_->Exec("ROLLBACK");
      return s;
    }
  }
  return db_->Exec("COMMIT");
}

absl::StatusOr<std::vector<RoundRow>> RoundsTable::Load() {
  std::vector<RoundRow> out;
  // Probed first: a read-only reader must not fail on a store that never had rounds.
  SEXTANT_ASSIGN_OR_RETURN(
      Statement probe,
      db_->Query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rounds'"));
  SEXTANT_ASSIGN_OR_RETURN(bool exists, probe.Next("find the rounds table"));
  if (!exists) return out;
  SEXTANT_ASSIGN_OR_RETURN(
      Statement q, db_->Query("SELECT round, region, accuracy, loss, clients, rejected, epsilon,"
                              " time FROM rounds ORDER BY round, region"));
  while (true) {
    SEXTANT_ASSIGN_OR_RETURN(bool row, q.Next("read the rounds"));
    if (!row) return out;
    RoundRow r;
    r.round = q.Int(0);
    r.region = q.Text(1);
    if (r.region == "global") r.region.clear();
    r.accuracy = Score(q.MaybeReal(2));
    r.loss = Score(q.MaybeReal(3));
    r.clients = q.Int(4);
    r.rejected = q.Int(5);
    r.epsilon = q.MaybeReal(6);
    r.time = q.Real(7);
    out.push_back(std::move(r));
  }
}

}  // namespace sextant
