#include "orchestrator/core/sqlite_db.h"

#include "absl/strings/str_cat.h"

namespace sextant {

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(const std::string& path, int flags,
                                                         int busy_timeout_ms) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::InternalError(absl::StrCat(path, ": cannot open store: ", msg));
  }
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return std::unique_ptr<SqliteDb>(new SqliteDb(db));
}

SqliteDb::~SqliteDb() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

absl::Status SqliteDb::Error(const char* what) const {
  return absl::InternalError(absl::StrCat("store: ", what, ": ", sqlite3_errmsg(db_)));
}

absl::Status SqliteDb::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("store: ", msg));
  }
  return absl::OkStatus();
}

absl::StatusOr<sqlite3_stmt*> SqliteDb::Prepare(const char* sql) {
  for (auto& [key, stmt] : cache_) {
    if (key == sql) return stmt;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) return Error("prepare");
  cache_.emplace_back(sql, stmt);
  return stmt;
}

absl::Status SqliteDb::CopyTo(SqliteDb* dest) {
  sqlite3_backup* b = sqlite3_backup_init(dest->db_, "main", db_, "main");
  if (b == nullptr) {
    return absl::InternalError(absl::StrCat("cannot copy the store: ", sqlite3_errmsg(dest->db_)));
  }
  const int step = sqlite3_backup_step(b, -1);
  const int finish = sqlite3_backup_finish(b);
  if (step != SQLITE_DONE || finish != SQLITE_OK) {
    return absl::InternalError(absl::StrCat("cannot copy the store: ", sqlite3_errmsg(dest->db_)));
  }
  return absl::OkStatus();
}

bool SqliteDb::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

int SqliteDb::Changes() const { return sqlite3_changes(db_); }

Statement::~Statement() {
  if (s_ == nullptr) return;
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}

absl::StatusOr<bool> Statement::Next(const char* what) {
  const int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return absl::InternalError(absl::StrCat("store: ", what, ": ", sqlite3_errmsg(db_)));
}

std::string Statement::Text(int col) const {
  const unsigned char* t = sqlite3_column_text(s_, col);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s_, col)) : "";
}

std::string Statement::Bytes(int col) const {
  const char* data = static_cast<const char*>(sqlite3_column_blob(s_, col));
  return std::string(data ? data : "", sqlite3_column_bytes(s_, col));
}

std::optional<double> Statement::MaybeReal(int col) const {
  if (sqlite3_column_type(s_, col) == SQLITE_NULL) return std::nullopt;
  return sqlite3_column_double(s_, col);
}

void Statement::Bind(int i, absl::string_view text) {
  sqlite3_bind_text(s_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

void Statement::Bind(int i, Blob blob) {
  sqlite3_bind_blob(s_, i, blob.bytes.data(), static_cast<int>(blob.bytes.size()),
                    SQLITE_TRANSIENT);
}

}  // namespace sextant
