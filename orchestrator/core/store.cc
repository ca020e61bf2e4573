#include "orchestrator/core/store.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/exact_number.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace sextant {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS trials(
  id INTEGER PRIMARY KEY, state TEXT NOT NULL, params TEXT NOT NULL, attempts INTEGER NOT NULL,
  failures INTEGER NOT NULL, value REAL, error TEXT NOT NULL, created_at REAL NOT NULL,
  finished_at REAL NOT NULL, fidelity REAL NOT NULL DEFAULT 0, target REAL NOT NULL DEFAULT 0,
  rungs TEXT NOT NULL DEFAULT '[]', scratch_restarts INTEGER NOT NULL DEFAULT 0,
  paused INTEGER NOT NULL DEFAULT 0, preemptions INTEGER NOT NULL DEFAULT 0,
  outcome TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS attempts(
  trial_id INTEGER NOT NULL, attempt INTEGER NOT NULL, worker_id INTEGER NOT NULL,
  started_at REAL NOT NULL, finished_at REAL, outcome TEXT, exit_code INTEGER, error TEXT,
  PRIMARY KEY(trial_id, attempt));
CREATE TABLE IF NOT EXISTS measurements(
  trial_id INTEGER NOT NULL, attempt INTEGER NOT NULL, seq INTEGER NOT NULL,
  elapsed REAL NOT NULL, metrics TEXT NOT NULL, PRIMARY KEY(trial_id, attempt, seq));
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, kind TEXT NOT NULL,
  trial_id INTEGER NOT NULL, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workers(
  id INTEGER PRIMARY KEY, region TEXT, pool TEXT, hostname TEXT, pid INTEGER, registered_at REAL);
CREATE TABLE IF NOT EXISTS telemetry(
  time REAL NOT NULL, worker_id INTEGER NOT NULL, trial_id INTEGER NOT NULL,
  cpu_percent REAL NOT NULL, rss_bytes INTEGER NOT NULL, gpu_count INTEGER NOT NULL,
  gpu_utilization REAL NOT NULL, gpu_memory_bytes INTEGER NOT NULL,
  gpu_memory_total_bytes INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS telemetry_by_worker ON telemetry(worker_id, time);
CREATE TABLE IF NOT EXISTS costs(
  kind TEXT NOT NULL, ref INTEGER NOT NULL, pool TEXT NOT NULL, region TEXT NOT NULL,
  market TEXT NOT NULL, start REAL NOT NULL, end REAL NOT NULL, cost REAL NOT NULL);
)sql";

std::string ColumnText(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? reinterpret_cast<const char*>(t) : "";
}

void BindText(sqlite3_stmt* s, int i, const std::string& v) {
  sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

// Resets a cached statement when the caller is done with it, whatever the outcome.
struct StmtGuard {
  sqlite3_stmt* s;
  ~StmtGuard() {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
};

// A number of the `outcome` column: JSON has no inf or NaN, so those are the strings "inf",
// "-inf" and "nan".
nlohmann::json OutcomeNumber(double v) {
  if (std::isfinite(v)) return v;
  if (std::isnan(v)) return "nan";
  return v > 0 ? "inf" : "-inf";
}

// The number OutcomeNumber wrote; `otherwise` for anything else (null: a row written before
// non-finite numbers were kept).
double ReadOutcomeNumber(const nlohmann::json& v, double otherwise) {
  if (v.is_number()) return v.get<double>();
  if (v == "inf") return std::numeric_limits<double>::infinity();
  if (v == "-inf") return -std::numeric_limits<double>::infinity();
  if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
  return otherwise;
}

// The `outcome` column: {"values": [...], "feasible": bool, "seconds": num, "violations": [...],
// "cost": num} (non-finite numbers as OutcomeNumber writes them); defaults left out.
std::string OutcomeJson(const TrialRow& t) {
  nlohmann::json j = nlohmann::json::object();
  if (!t.values.empty()) {
    nlohmann::json values = nlohmann::json::array();
    for (double v : t.values) values.push_back(OutcomeNumber(v));
    j["values"] = std::move(values);
  }
  if (!t.feasible) j["feasible"] = false;
  if (!t.violations.empty()) {
    nlohmann::json violations = nlohmann::json::array();
    for (double v : t.violations) violations.push_back(OutcomeNumber(v));
    j["violations"] = std::move(violations);
  }
  if (t.cost) j["cost"] = *t.cost;
  if (t.seconds > 0) j["seconds"] = t.seconds;
  return j.dump();
}

void ReadOutcomeJson(const std::string& text, TrialRow* t) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return;
  if (j.contains("values") && j["values"].is_array()) {
    for (const nlohmann::json& v : j["values"]) {
      t->values.push_back(ReadOutcomeNumber(v, std::numeric_limits<double>::quiet_NaN()));
    }
  }
  if (j.contains("feasible") && j["feasible"].is_boolean()) t->feasible = j["feasible"].get<bool>();
  if (j.contains("seconds") && j["seconds"].is_number()) t->seconds = j["seconds"].get<double>();
  if (j.contains("violations") && j["violations"].is_array()) {
    for (const nlohmann::json& v : j["violations"]) {
      t->violations.push_back(ReadOutcomeNumber(v, std::numeric_limits<double>::infinity()));
    }
  }
  if (j.contains("cost") && j["cost"].is_number()) t->cost = j["cost"].get<double>();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path, bool create,
                                                   bool read_only) {
  struct stat st;
  if (!create && stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat(path, ": no such store (not a Sextant run directory?)"));
  }
  sqlite3* db = nullptr;
  int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  flags |= SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::InternalError(absl::StrCat(path, ": cannot open store: ", msg));
  }
  std::unique_ptr<Store> store(new Store(db));
  sqlite3_busy_timeout(db, 5000);
  if (!read_only) {
    // WAL with synchronous=FULL: every commit fsyncs the WAL, so acknowledged changes survive
    // a power cut; readers never block the single writer.
    SEXTANT_RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
    SEXTANT_RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
    SEXTANT_RETURN_IF_ERROR(store->Exec(kSchema));
  }
  SEXTANT_RETURN_IF_ERROR(store->Upgrade(read_only));
  return store;
}

absl::Status Store::CopyTo(Store* dest) {
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

absl::Status Store::Upgrade(bool read_only) {
  SEXTANT_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                           Prepare("SELECT name FROM pragma_table_info('trials')"));
  StmtGuard g{s};
  bool has_outcome = false;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) has_outcome |= ColumnText(s, 0) == "outcome";
  if (rc != SQLITE_DONE) return Error("read the trials table's columns");
  has_outcome_ = has_outcome;
  if (read_only) return absl::OkStatus();
  if (!has_outcome) {
    SEXTANT_RETURN_IF_ERROR(
        Exec("ALTER TABLE trials ADD COLUMN outcome TEXT NOT NULL DEFAULT '{}'"));
    has_outcome_ = true;
  }
  return RepairTimes();
}

absl::StatusOr<std::optional<double>> Store::DerivedTime(const std::string& key) {
  const char* sql =
      key == "finished_at"
          ? "SELECT MAX(time) FROM events WHERE kind = 'run_finished'"
          : "SELECT MIN(t) FROM (SELECT MIN(created_at) AS t FROM trials UNION ALL"
            " SELECT MIN(started_at) FROM attempts UNION ALL SELECT MIN(time) FROM events)";
  SEXTANT_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare(sql));
  StmtGuard g{s};
  if (sqlite3_step(s) != SQLITE_ROW) return Error("derive a time");
  if (sqlite3_column_type(s, 0) == SQLITE_NULL) return std::optional<double>();
  return std::optional<double>(sqlite3_column_double(s, 0));
}

absl::Status Store::RepairTimes() {
  for (const char* key : {"started_at", "finished_at"}) {
    SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> text, GetMeta(key));
    if (!text || ParseUnixSeconds(*text)) continue;
    SEXTANT_ASSIGN_OR_RETURN(std::optional<double> exact, DerivedTime(key));
    // Only a time the records pin down replaces the rounded one; the rest stay as written.
    if (exact) SEXTANT_RETURN_IF_ERROR(PutTimeMeta(key, *exact));
  }
  return absl::OkStatus();
}

absl::Status Store::PutTimeMeta(const std::string& key, double unix_seconds) {
  return PutMeta(key, UnixSecondsText(unix_seconds));
}

absl::StatusOr<std::optional<double>> Store::GetTimeMeta(const std::string& key) {
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> text, GetMeta(key));
  if (!text) return std::optional<double>();
  if (std::optional<double> t = ParseUnixSeconds(*text)) return t;
  SEXTANT_ASSIGN_OR_RETURN(std::optional<double> exact, DerivedTime(key));
  if (exact) return exact;
  double rounded = 0;
  if (absl::SimpleAtod(*text, &rounded)) return std::optional<double>(rounded);
  return absl::DataLossError(absl::StrCat("store: the run's ", key, " is not a time: ", *text));
}

Store::~Store() {
  for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

absl::Status Store::Error(const char* what) {
  return absl::InternalError(absl::StrCat("store: ", what, ": ", sqlite3_errmsg(db_)));
}

absl::Status Store::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("store: ", msg));
  }
  return absl::OkStatus();
}

absl::StatusOr<sqlite3_stmt*> Store::Prepare(const char* sql) {
  // Statements are keyed by the address of their literal: each call site has its own.
  for (auto& [key, stmt] : cache_) {
    if (key == sql) return stmt;
  }
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) != SQLITE_OK) return Error("prepare");
  cache_.emplace_back(sql, stmt);
  return stmt;
}

absl::Status Store::Begin() { return Exec("BEGIN IMMEDIATE"); }
absl::Status Store::Commit() { return Exec("COMMIT"); }
void Store::Rollback() { (void)Exec("ROLLBACK"); }
bool Store::InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

absl::Status Store::PutMeta(const std::string& key, const std::string& value) {
  SEXTANT_ASSIGN_OR_RETURN(sqlite3_stmt * s,
                           Prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)"));
  StmtGuard g{s};
  BindText(s, 1, key);
  sqlite3_bind_blob(s, 2, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("put meta");
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> Store::GetMeta(const std::string& key) {
  SEXTANT_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare("SELECT value FROM meta WHERE key = ?"));
  StmtGuard g{s};
  BindText(s, 1, key);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return Error("get meta");
  const char* data = static_cast<const char*>(sqlite3_column_blob(s, 0));
  return std::optional<std::string>(std::string(data ? data : "", sqlite3_column_bytes(s, 0)));
}

const std::string& TrialStateName(v1::TrialState state) { return v1::TrialState_Name(state); }

const std::string& RunStateName(v1::RunState state) {
  static const auto* names = [] {
    auto* m = new std::map<v1::RunState, std::string>();
    for (int i = v1::RunState_MIN; i <= v1::RunState_MAX; ++i) {
      if (!v1::RunState_IsValid(i)) continue;
      const auto state = static_cast<v1::RunState>(i);
      const std::string& full = v1::RunState_Name(state);
      (*m)[state] = state == v1::RUN_STATE_UNSPECIFIED ? "UNKNOWN" : full.substr(4);  // "RUN_"
    }
    return m;
  }();
  static const std::string unknown = "UNKNOWN";
  auto it = names->find(state);
  return it == names->end() ? unknown : it->second;
}

v1::RunState ParseRunState(absl::string_view name) {
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
  if (name.empty() || name == "UNKNOWN" || name == "STATE_UNSPECIFIED" ||
      !v1::RunState_Parse(absl::StrCat("RUN_", name), &state)) {
    return v1::RUN_STATE_UNSPECIFIED;
  }
  return state;
}

const std::string& AttemptOutcomeName(v1::AttemptOutcome outcome) {
  static const auto* names = [] {
    auto* m = new std::map<v1::AttemptOutcome, std::string>();
    for (int i = v1::AttemptOutcome_MIN; i <= v1::AttemptOutcome_MAX; ++i) {
      if (!v1::AttemptOutcome_IsValid(i)) continue;
      const auto outcome = static_cast<v1::AttemptOutcome>(i);
      (*m)[outcome] = v1::AttemptOutcome_Name(outcome).substr(8);  // "ATTEMPT_"
    }
    (*m)[v1::ATTEMPT_OUTCOME_UNSPECIFIED] = "";
    (*m)[v1::ATTEMPT_LOST] = "lost";  // lower case since the first version: old stores read alike
    return m;
  }();
  static const std::string none;
  auto it = names->find(outcome);
  return it == names->end() ? none : it->second;
}

v1::AttemptOutcome ParseAttemptOutcome(absl::string_view name) {
  for (int i = v1::AttemptOutcome_MIN; i <= v1::AttemptOutcome_MAX; ++i) {
    if (!v1::AttemptOutcome_IsValid(i)) continue;
    const auto outcome = static_cast<v1::AttemptOutcome>(i);
    if (AttemptOutcomeName(outcome) == name) return outcome;
  }
  return v1::ATTEMPT_OUTCOME_UNSPECIFIED;
}

absl::Status Store::SetRunState(v1::RunState state) {
  return PutMeta("state", RunStateName(state));
}

absl::StatusOr<v1::RunState> Store::GetRunState() {
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> name, GetMeta("state"));
  return name ? ParseRunState(*name) : v1::RUN_STATE_UNSPECIFIED;
}

absl::Status Store::EndRun(v1::RunState state, double time, const std::string& why) {
  SEXTANT_RETURN_IF_ERROR(SetRunState(state));
  SEXTANT_RETURN_IF_ERROR(PutTimeMeta("finished_at", time));
  const std::string& name = RunStateName(state);
  return AddEvent(time, "run_finished", 0, why.empty() ? name : absl::StrCat(name, ": ", why));
}

bool TrialEnded(v1::TrialState state) {
  return state == v1::COMPLETED || state == v1::PRUNED || state == v1::FAILED;
}

absl::Status Store::PutTrial(const TrialRow& t) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT OR REPLACE INTO trials(id, state, params, attempts, failures, value, error,"
              " created_at, finished_at, fidelity, target, rungs, scratch_restarts, paused,"
              " preemptions, outcome) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  StmtGuard g{s};
  sqlite3_bind_int64(s, 1, t.id);
  BindText(s, 2, TrialStateName(t.state));
  BindText(s, 3, t.params_json);
  sqlite3_bind_int(s, 4, t.attempts);
  sqlite3_bind_int(s, 5, t.failures);
  if (t.value) {
    sqlite3_bind_double(s, 6, *t.value);
  } else {
    sqlite3_bind_null(s, 6);
  }
  BindText(s, 7, t.error);
  sqlite3_bind_double(s, 8, t.created_at);
  sqlite3_bind_double(s, 9, t.finished_at);
  sqlite3_bind_double(s, 10, t.fidelity);
  sqlite3_bind_double(s, 11, t.target);
  BindText(s, 12, t.rungs_json);
  sqlite3_bind_int(s, 13, t.scratch_restarts);
  sqlite3_bind_int(s, 14, t.paused ? 1 : 0);
  sqlite3_bind_int(s, 15, t.preemptions);
  BindText(s, 16, OutcomeJson(t));
  if (sqlite3_step(s) != SQLITE_DONE) return Error("put trial");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TrialRow>> Store::LoadTrials() {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare(has_outcome_
                  ? "SELECT id, state, params, attempts, failures, value, error, created_at,"
                    " finished_at, fidelity, target, rungs, scratch_restarts, paused, preemptions,"
                    " outcome FROM trials ORDER BY id"
                  : "SELECT id, state, params, attempts, failures, value, error, created_at,"
                    " finished_at, fidelity, target, rungs, scratch_restarts, paused, preemptions,"
                    " '{}' FROM trials ORDER BY id"));
  StmtGuard g{s};
  std::vector<TrialRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    TrialRow t;
    t.id = sqlite3_column_int64(s, 0);
    const std::string state = ColumnText(s, 1);
    if (!v1::TrialState_Parse(state, &t.state) || t.state == v1::TRIAL_STATE_UNSPECIFIED) {
      return absl::DataLossError(
          absl::StrCat("trial ", t.id, " has the unknown state '", state.substr(0, 64), "'"));
    }
    t.params_json = ColumnText(s, 2);
    t.attempts = sqlite3_column_int(s, 3);
    t.failures = sqlite3_column_int(s, 4);
    if (sqlite3_column_type(s, 5) != SQLITE_NULL) t.value = sqlite3_column_double(s, 5);
    t.error = ColumnText(s, 6);
    t.created_at = sqlite3_column_double(s, 7);
    t.finished_at = sqlite3_column_double(s, 8);
    t.fidelity = sqlite3_column_double(s, 9);
    t.target = sqlite3_column_double(s, 10);
    t.rungs_json = ColumnText(s, 11);
    t.scratch_restarts = sqlite3_column_int(s, 12);
    t.paused = sqlite3_column_int(s, 13) != 0;
    t.preemptions = sqlite3_column_int(s, 14);
    ReadOutcomeJson(ColumnText(s, 15), &t);
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return Error("load trials");
  return out;
}

absl::Status Store::StartAttempt(int64_t trial_id, int attempt, int64_t worker_id, double time) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT OR REPLACE INTO attempts(trial_id, attempt, worker_id, started_at)"
              " VALUES(?, ?, ?, ?)"));
  StmtGuard g{s};
  sqlite3_bind_int64(s, 1, trial_id);
  sqlite3_bind_int(s, 2, attempt);
  sqlite3_bind_int64(s, 3, worker_id);
  sqlite3_bind_double(s, 4, time);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("start attempt");
  return absl::OkStatus();
}

absl::Status Store::FinishAttempt(int64_t trial_id, int attempt, v1::AttemptOutcome outcome,
                                  int exit_code, const std::string& error, double time) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("UPDATE attempts SET finished_at = ?, outcome = ?, exit_code = ?, error = ?"
              " WHERE trial_id = ? AND attempt = ?"));
  StmtGuard g{s};
  sqlite3_bind_double(s, 1, time);
  BindText(s, 2, AttemptOutcomeName(outcome));
  sqlite3_bind_int(s, 3, exit_code);
  BindText(s, 4, error);
  sqlite3_bind_int64(s, 5, trial_id);
  sqlite3_bind_int(s, 6, attempt);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("finish attempt");
  return absl::OkStatus();
}

absl::StatusOr<std::optional<AttemptRow>> Store::LoadAttempt(int64_t trial_id, int attempt) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT worker_id, started_at, finished_at, outcome, exit_code, error FROM attempts"
              " WHERE trial_id = ? AND attempt = ?"));
  StmtGuard g{s};
  sqlite3_bind_int64(s, 1, trial_id);
  sqlite3_bind_int(s, 2, attempt);
  const int rc = sqlite3_step(s);
  if (rc == SQLITE_DONE) return std::nullopt;
  if (rc != SQLITE_ROW) return Error("load attempt");
  AttemptRow a;
  a.trial_id = trial_id;
  a.attempt = attempt;
  a.worker_id = sqlite3_column_int64(s, 0);
  a.started_at = sqlite3_column_double(s, 1);
  if (sqlite3_column_type(s, 2) != SQLITE_NULL) a.finished_at = sqlite3_column_double(s, 2);
  a.outcome = ParseAttemptOutcome(ColumnText(s, 3));
  a.exit_code = sqlite3_column_int(s, 4);
  a.error = ColumnText(s, 5);
  return a;
}

absl::StatusOr<bool> Store::AddMeasurement(const MeasurementRow& m) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT OR IGNORE INTO measurements(trial_id, attempt, seq, elapsed, metrics)"
              " VALUES(?, ?, ?, ?, ?)"));
  StmtGuard g{s};
  sqlite3_bind_int64(s, 1, m.trial_id);
  sqlite3_bind_int(s, 2, m.attempt);
  sqlite3_bind_int64(s, 3, m.sequence);
  sqlite3_bind_double(s, 4, m.elapsed);
  BindText(s, 5, m.metrics_json);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("add measurement");
  return sqlite3_changes(db_) > 0;
}

absl::StatusOr<std::vector<MeasurementRow>> Store::LoadMeasurements(int64_t trial_id) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s, Prepare("SELECT trial_id, attempt, seq, elapsed, metrics FROM measurements"
                                " WHERE ?1 = 0 OR trial_id = ?1 ORDER BY trial_id, attempt, seq"));
  StmtGuard g{s};
  sqlite3_bind_int64(s, 1, trial_id);
  std::vector<MeasurementRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.push_back(MeasurementRow{sqlite3_column_int64(s, 0), sqlite3_column_int(s, 1),
                                 sqlite3_column_int64(s, 2), sqlite3_column_double(s, 3),
                                 ColumnText(s, 4)});
  }
  if (rc != SQLITE_DONE) return Error("load measurements");
  return out;
}

absl::Status Store::AddEvent(double time, const std::string& kind, int64_t trial_id,
                             const std::string& message) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT INTO events(time, kind, trial_id, message) VALUES(?, ?, ?, ?)"));
  StmtGuard g{s};
  sqlite3_bind_double(s, 1, time);
  BindText(s, 2, kind);
  sqlite3_bind_int64(s, 3, trial_id);
  BindText(s, 4, message);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("add event");
  return absl::OkStatus();
}

absl::Status Store::ClearCosts() { return Exec("DELETE FROM costs"); }

absl::Status Store::AddCost(const CostRow& c) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT INTO costs(kind, ref, pool, region, market, start, end, cost)"
              " VALUES(?, ?, ?, ?, ?, ?, ?, ?)"));
  StmtGuard g{s};
  BindText(s, 1, c.kind);
  sqlite3_bind_int64(s, 2, c.ref);
  BindText(s, 3, c.pool);
  BindText(s, 4, c.region);
  BindText(s, 5, c.market);
  sqlite3_bind_double(s, 6, c.start);
  sqlite3_bind_double(s, 7, c.end);
  sqlite3_bind_double(s, 8, c.cost);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("add cost");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CostRow>> Store::LoadCosts() {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT kind, ref, pool, region, market, start, end, cost FROM costs"
              " ORDER BY rowid"));
  StmtGuard g{s};
  std::vector<CostRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    CostRow c;
    c.kind = ColumnText(s, 0);
    c.ref = sqlite3_column_int64(s, 1);
    c.pool = ColumnText(s, 2);
    c.region = ColumnText(s, 3);
    c.market = ColumnText(s, 4);
    c.start = sqlite3_column_double(s, 5);
    c.end = sqlite3_column_double(s, 6);
    c.cost = sqlite3_column_double(s, 7);
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) return Error("load costs");
  return out;
}

absl::StatusOr<std::vector<EventRow>> Store::LoadEvents(int64_t after_id, int limit) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s, Prepare("SELECT id, time, kind, trial_id, message FROM events WHERE id > ?"
                                " ORDER BY id LIMIT ?"));
  StmtGuard g{s};
  sqlite3_bind_int64(s, 1, after_id);
  sqlite3_bind_int64(s, 2, limit > 0 ? limit : -1);
  std::vector<EventRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    out.push_back(EventRow{sqlite3_column_int64(s, 0), sqlite3_column_double(s, 1),
                           ColumnText(s, 2), sqlite3_column_int64(s, 3), ColumnText(s, 4)});
  }
  if (rc != SQLITE_DONE) return Error("load events");
  return out;
}

absl::Status Store::AddWorker(int64_t id, const std::string& region, const std::string& pool,
                              const std::string& hostname, int64_t pid, double time) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT OR REPLACE INTO workers(id, region, pool, hostname, pid, registered_at)"
              " VALUES(?, ?, ?, ?, ?, ?)"));
  StmtGuard g{s};
  sqlite3_bind_int64(s, 1, id);
  BindText(s, 2, region);
  BindText(s, 3, pool);
  BindText(s, 4, hostname);
  sqlite3_bind_int64(s, 5, pid);
  sqlite3_bind_double(s, 6, time);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("add worker");
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Store::MaxWorkerId() {
  SEXTANT_ASSIGN_OR_RETURN(sqlite3_stmt * s, Prepare("SELECT COALESCE(MAX(id), 0) FROM workers"));
  StmtGuard g{s};
  if (sqlite3_step(s) != SQLITE_ROW) return Error("max worker id");
  return sqlite3_column_int64(s, 0);
}

absl::Status Store::AddTelemetry(const TelemetryRow& t) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("INSERT INTO telemetry(time, worker_id, trial_id, cpu_percent, rss_bytes, gpu_count,"
              " gpu_utilization, gpu_memory_bytes, gpu_memory_total_bytes)"
              " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)"));
  StmtGuard g{s};
  sqlite3_bind_double(s, 1, t.time);
  sqlite3_bind_int64(s, 2, t.worker_id);
  sqlite3_bind_int64(s, 3, t.trial_id);
  sqlite3_bind_double(s, 4, t.cpu_percent);
  sqlite3_bind_int64(s, 5, t.rss_bytes);
  sqlite3_bind_int(s, 6, t.gpu_count);
  sqlite3_bind_double(s, 7, t.gpu_utilization);
  sqlite3_bind_int64(s, 8, t.gpu_memory_bytes);
  sqlite3_bind_int64(s, 9, t.gpu_memory_total_bytes);
  if (sqlite3_step(s) != SQLITE_DONE) return Error("add telemetry");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TelemetryRow>> Store::LoadTelemetry(bool latest_only) {
  SEXTANT_ASSIGN_OR_RETURN(
      sqlite3_stmt * s,
      Prepare("SELECT time, worker_id, trial_id, cpu_percent, rss_bytes, gpu_count,"
              " gpu_utilization, gpu_memory_bytes, gpu_memory_total_bytes FROM telemetry t"
              " WHERE ?1 = 0 OR time = (SELECT MAX(time) FROM telemetry u"
              " WHERE u.worker_id = t.worker_id) ORDER BY worker_id, time"));
  StmtGuard g{s};
  sqlite3_bind_int(s, 1, latest_only ? 1 : 0);
  std::vector<TelemetryRow> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    TelemetryRow t;
    t.time = sqlite3_column_double(s, 0);
    t.worker_id = sqlite3_column_int64(s, 1);
    t.trial_id = sqlite3_column_int64(s, 2);
    t.cpu_percent = sqlite3_column_double(s, 3);
    t.rss_bytes = sqlite3_column_int64(s, 4);
    t.gpu_count = sqlite3_column_int(s, 5);
    t.gpu_utilization = sqlite3_column_double(s, 6);
    t.gpu_memory_bytes = sqlite3_column_int64(s, 7);
    t.gpu_memory_total_bytes = sqlite3_column_int64(s, 8);
    out.push_back(t);
  }
  if (rc != SQLITE_DONE) return Error("load telemetry");
  return out;
}

}  // namespace sextant
