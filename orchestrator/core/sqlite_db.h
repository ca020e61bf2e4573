#ifndef SEXTANT_ORCHESTRATOR_CORE_SQLITE_DB_H_
#define SEXTANT_ORCHESTRATOR_CORE_SQLITE_DB_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sextant {

// Bytes bound as a BLOB (a string binds as TEXT).
struct Blob {
  absl::string_view bytes;
};

// One use of a connection's cached prepared statement: its parameters bound in order, its rows
// stepped through and read by column. Resets the statement (and clears its bindings) when it
// goes out of scope, so that the next use starts afresh.
class Statement {
 public:
  Statement(Statement&& other) noexcept : s_(std::exchange(other.s_, nullptr)), db_(other.db_) {}
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  // Steps to the next row: true at a row, false past the last one; Internal ("store: <what>:
  // <SQLite's message>") on an error.
  absl::StatusOr<bool> Next(const char* what);
  // Column col of the current row: integers, reals, text (empty for NULL), the bytes of a
  // BLOB, and a real that may be NULL.
  int64_t Int(int col) const { return sqlite3_column_int64(s_, col); }
  double Real(int col) const { return sqlite3_column_double(s_, col); }
  std::string Text(int col) const;
  std::string Bytes(int col) const;
  std::optional<double> MaybeReal(int col) const;

 private:
  friend class SqliteDb;
  Statement(sqlite3_stmt* s, sqlite3* db) : s_(s), db_(db) {}
  // Binds one value to parameter i (1-based): integers and bools as INTEGER, floating point as
  // REAL, strings as TEXT, Blob as BLOB, an empty std::optional as NULL.
  void Bind(int i, absl::string_view text);
  void Bind(int i, Blob blob);
  void Bind(int i, double v) { sqlite3_bind_double(s_, i, v); }
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
  void Bind(int i, T v) {
    sqlite3_bind_int64(s_, i, static_cast<int64_t>(v));
  }
  template <typename T>
  void Bind(int i, const std::optional<T>& v) {
    if (v) {
      Bind(i, *v);
    } else {
      sqlite3_bind_null(s_, i);
    }
  }
  void Bind(int i, const std::string& text) { Bind(i, absl::string_view(text)); }
  void Bind(int i, const char* text) { Bind(i, absl::string_view(text)); }

  sqlite3_stmt* s_;
  sqlite3* db_;
};

// One SQLite connection and its prepared statements, each cached by the address of its SQL
// literal (so each call site has its own). Not thread-safe.
class SqliteDb {
 public:
  // Opens path with sqlite3_open_v2's flags and a busy timeout. Internal (naming path and
  // SQLite's message) when it cannot.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path, int flags,
                                                        int busy_timeout_ms = 5000);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  // Runs sql (one or more statements, no parameters) to its end. Internal with SQLite's
  // message.
  absl::Status Exec(const char* sql);
  // The cached statement of sql (a literal) with args bound to its parameters 1, 2, ... as
  // Statement::Bind says. Internal when it cannot be prepared.
  template <typename... Args>
  absl::StatusOr<Statement> Query(const char* sql, const Args&... args) {
    absl::StatusOr<sqlite3_stmt*> s = Prepare(sql);
    if (!s.ok()) return s.status();
    Statement st(*s, db_);
    int i = 0;
    (st.Bind(++i, args), ...);
    return st;
  }
  // Runs sql with args (Query) to its end: Internal ("store: <what>: ...") when it fails.
  template <typename... Args>
  absl::Status Run(const char* what, const char* sql, const Args&... args) {
    absl::StatusOr<Statement> st = Query(sql, args...);
    if (!st.ok()) return st.status();
    absl::StatusOr<bool> row = st->Next(what);
    return row.ok() ? absl::OkStatus() : row.status();
  }
  // Internal: "store: <what>: <SQLite's last message>".
  absl::Status Error(const char* what) const;
  // Replaces dest's whole contents with this database's (SQLite's online backup).
  absl::Status CopyTo(SqliteDb* dest);
  // True between BEGIN and COMMIT or ROLLBACK.
  bool InTransaction() const;
  // The rows the last statement inserted, changed or deleted.
  int Changes() const;

 private:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  absl::StatusOr<sqlite3_stmt*> Prepare(const char* sql);
  sqlite3* db_;
  std::vector<std::pair<const char*, sqlite3_stmt*>> cache_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_SQLITE_DB_H_
