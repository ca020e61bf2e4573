#include "orchestrator/federated/federated_rounds_table.h"

#include <sqlite3.h>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

absl::Status Err(sqlite3* db, const char* what) {
  return absl::InternalError(absl::StrCat("rounds table: ", what, ": ", sqlite3_errmsg(db)));
}

}  // namespace

absl::StatusOr<RoundsTable> RoundsTable::Open(const std::string& db_path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
      SQLITE_OK) {
    absl::Status s = Err(db, "open");
    sqlite3_close(db);
    return s;
  }
  RoundsTable t(db);
  sqlite3_busy_timeout(db, 10000);
  const char* sql =
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
      "CREATE TABLE IF NOT EXISTS rounds (round INTEGER NOT NULL, region TEXT NOT NULL,"
      " accuracy REAL, loss REAL, clients INTEGER, rejected INTEGER, epsilon REAL NULL,"
      " time REAL, PRIMARY KEY (round, region));";
  if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return Err(db, "schema");
  return t;
}

RoundsTable::~RoundsTable() {
  if (db_ != nullptr) sqlite3_close(db_);
}

absl::Status RoundsTable::Put(const std::vector<RoundRow>& rows) {
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Err(db_, "begin");
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_,
                         "INSERT OR REPLACE INTO rounds (round, region, accuracy, loss, clients,"
                         " rejected, epsilon, time) VALUES (?,?,?,?,?,?,?,?)",
                         -1, &st, nullptr) != SQLITE_OK) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return Err(db_, "prepare");
  }
  for (const RoundRow& r : rows) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, r.round);
    sqlite3_bind_text(st, 2, r.region.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_double(st, 3, r.accuracy);
    sqlite3_bind_double(st, 4, r.loss);
    sqlite3_bind_int64(st, 5, r.clients);
    sqlite3_bind_int64(st, 6, r.rejected);
    if (r.epsilon) {
      sqlite3_bind_double(st, 7, *r.epsilon);
    } else {
      sqlite3_bind_null(st, 7);
    }
    sqlite3_bind_double(st, 8, r.time);
    if (sqlite3_step(st) != SQLITE_DONE) {
      sqlite3_finalize(st);
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      return Err(db_, "insert");
    }
  }
  sqlite3_finalize(st);
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK)
    return Err(db_, "commit");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RoundRow>> RoundsTable::Load() {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_,
                         "SELECT round, region, accuracy, loss, clients, rejected, epsilon, time"
                         " FROM rounds ORDER BY round, region",
                         -1, &st, nullptr) != SQLITE_OK) {
    return Err(db_, "prepare");
  }
  std::vector<RoundRow> out;
  while (sqlite3_step(st) == SQLITE_ROW) {
    RoundRow r;
    r.round = sqlite3_column_int64(st, 0);
    r.region = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    r.accuracy = sqlite3_column_double(st, 2);
    r.loss = sqlite3_column_double(st, 3);
    r.clients = sqlite3_column_int64(st, 4);
    r.rejected = sqlite3_column_int64(st, 5);
    if (sqlite3_column_type(st, 6) != SQLITE_NULL) r.epsilon = sqlite3_column_double(st, 6);
    r.time = sqlite3_column_double(st, 7);
    out.push_back(std::move(r));
  }
  sqlite3_finalize(st);
  return out;
}

}  // namespace sextant
