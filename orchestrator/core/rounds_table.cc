#include "orchestrator/core/rounds_table.h"

#include <sqlite3.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

absl::Status Err(sqlite3* db, const char* what) {
  return absl::InternalError(absl::StrCat("rounds table: ", what, ": ", sqlite3_errmsg(db)));
}

absl::StatusOr<sqlite3*> OpenDb(const std::string& db_path, int flags) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    absl::Status s = db ? Err(db, "open") : absl::InternalError("rounds table: out of memory");
    sqlite3_close(db);
    return s;
  }
  sqlite3_busy_timeout(db, 10000);
  return db;
}

}  // namespace

absl::StatusOr<RoundsTable> RoundsTable::Open(const std::string& db_path) {
  absl::StatusOr<sqlite3*> db = OpenDb(db_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  if (!db.ok()) return db.status();
  RoundsTable t(*db);
  const char* sql =
      "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
      "CREATE TABLE IF NOT EXISTS rounds (round INTEGER NOT NULL, region TEXT NOT NULL,"
      " accuracy REAL, loss REAL, clients INTEGER, rejected INTEGER, epsilon REAL NULL,"
      " time REAL, PRIMARY KEY (round, region));";
  if (sqlite3_exec(*db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return Err(*db, "schema");
  return t;
}

absl::StatusOr<RoundsTable> RoundsTable::OpenReadOnly(const std::string& db_path) {
  absl::StatusOr<sqlite3*> db = OpenDb(db_path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX);
  if (!db.ok()) return db.status();
  return RoundsTable(*db);
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
    // A score that is not a number (a region that sat the round out) is stored as NULL.
    auto bind_score = [&](int at, double v) {
      if (std::isnan(v)) {
        sqlite3_bind_null(st, at);
      } else {
        sqlite3_bind_double(st, at, v);
      }
    };
    bind_score(3, r.accuracy);
    bind_score(4, r.loss);
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
  std::vector<RoundRow> out;
  sqlite3_stmt* st = nullptr;
  // Probed first: a read-only reader must not fail on a store that never had rounds.
  if (sqlite3_prepare_v2(db_,
                         "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rounds'", -1,
                         &st, nullptr) != SQLITE_OK) {
    return Err(db_, "prepare");
  }
  const bool exists = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  if (!exists) return out;
  if (sqlite3_prepare_v2(db_,
                         "SELECT round, region, accuracy, loss, clients, rejected, epsilon, time"
                         " FROM rounds ORDER BY round, region",
                         -1, &st, nullptr) != SQLITE_OK) {
    return Err(db_, "prepare");
  }
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    RoundRow r;
    r.round = sqlite3_column_int64(st, 0);
    const unsigned char* region = sqlite3_column_text(st, 1);
    r.region = region ? reinterpret_cast<const char*>(region) : "";
    if (r.region == "global") r.region.clear();
    auto score = [&](int at) {
      return sqlite3_column_type(st, at) == SQLITE_NULL ? std::numeric_limits<double>::quiet_NaN()
                                                        : sqlite3_column_double(st, at);
    };
    r.accuracy = score(2);
    r.loss = score(3);
    r.clients = sqlite3_column_int64(st, 4);
    r.rejected = sqlite3_column_int64(st, 5);
    if (sqlite3_column_type(st, 6) != SQLITE_NULL) r.epsilon = sqlite3_column_double(st, 6);
    r.time = sqlite3_column_double(st, 7);
    out.push_back(std::move(r));
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return Err(db_, "read");
  return out;
}

}  // namespace sextant
