#include "orchestrator/core/store.h"

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

// Adds columns that newer versions keep to a store written by an older one (read-write), or
// notes that they are absent (read-only: they read as their defaults). Returns whether the
// trials table has the `outcome` column.
absl::StatusOr<bool> Upgrade(SqliteDb& db, bool read_only) {
  SEXTANT_ASSIGN_OR_RETURN(Statement q, db.Query("SELECT name FROM pragma_table_info('trials')"));
  bool has_outcome = false;
  while (true) {
    SEXTANT_ASSIGN_OR_RETURN(bool row, q.Next("read the trials table's columns"));
    if (!row) break;
    has_outcome |= q.Text(0) == "outcome";
  }
  if (read_only || has_outcome) return has_outcome;
  SEXTANT_RETURN_IF_ERROR(
      db.Exec("ALTER TABLE trials ADD COLUMN outcome TEXT NOT NULL DEFAULT '{}'"));
  return true;
}

// The exact time a rounded "started_at" or "finished_at" stood for: the first record of the
// run, or its last run_finished event. nullopt when the records do not tell.
absl::StatusOr<std::optional<double>> DerivedTime(SqliteDb& db, const std::string& key) {
  SEXTANT_ASSIGN_OR_RETURN(
      Statement q,
      db.Query(
          key == "finished_at"
              ? "SELECT MAX(time) FROM events WHERE kind = 'run_finished'"
              : "SELECT MIN(t) FROM (SELECT MIN(created_at) AS t FROM trials UNION ALL"
                " SELECT MIN(started_at) FROM attempts UNION ALL SELECT MIN(time) FROM events)"));
  SEXTANT_ASSIGN_OR_RETURN(bool row, q.Next("derive a time"));
  if (!row) return db.Error("derive a time");
  return q.MaybeReal(0);
}

// Rewrites rounded times (see GetTimeMeta) exactly where the records tell them.
absl::Status RepairTimes(Store& store, SqliteDb& db) {
  for (const char* key : {"started_at", "finished_at"}) {
    SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> text, store.GetMeta(key));
    if (!text || ParseUnixSeconds(*text)) continue;
    SEXTANT_ASSIGN_OR_RETURN(std::optional<double> exact, DerivedTime(db, key));
    // Only a time the records pin down replaces the rounded one; the rest stay as written.
    if (exact) SEXTANT_RETURN_IF_ERROR(store.PutTimeMeta(key, *exact));
  }
  return absl::OkStatus();
}

// Reads every row of q with read(q), in order.
template <typename Row, typename Read>
absl::StatusOr<std::vector<Row>> Rows(Statement& q, const char* what, Read read) {
  std::vector<Row> out;
  while (true) {
    SEXTANT_ASSIGN_OR_RETURN(bool row, q.Next(what));
    if (!row) return out;
    out.push_back(read(q));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path, bool create,
                                                   bool read_only) {
  struct stat st;
  if (!create && stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat(path, ": no such store (not a Sextant run directory?)"));
  }
  int flags = read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  flags |= SQLITE_OPEN_NOMUTEX;
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db, SqliteDb::Open(path, flags));
  std::unique_ptr<Store> store(new Store(std::move(db)));
  if (!read_only) {
    // WAL with synchronous=FULL: every commit fsyncs the WAL, so acknowledged changes survive
    // a power cut; readers never block the single writer.
    SEXTANT_RETURN_IF_ERROR(store->db_->Exec("PRAGMA journal_mode=WAL"));
    SEXTANT_RETURN_IF_ERROR(store->db_->Exec("PRAGMA synchronous=FULL"));
    SEXTANT_RETURN_IF_ERROR(store->db_->Exec(kSchema));
  }
  SEXTANT_ASSIGN_OR_RETURN(store->has_outcome_, Upgrade(*store->db_, read_only));
  if (!read_only) SEXTANT_RETURN_IF_ERROR(RepairTimes(*store, *store->db_));
  return store;
}

absl::Status Store::CopyTo(Store* dest) { return db_->CopyTo(dest->db_.get()); }

absl::Status Store::PutTimeMeta(const std::string& key, double unix_seconds) {
  return PutMeta(key, UnixSecondsText(unix_seconds));
}

absl::StatusOr<std::optional<double>> Store::GetTimeMeta(const std::string& key) {
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> text, GetMeta(key));
  if (!text) return std::optional<double>();
  if (std::optional<double> t = ParseUnixSeconds(*text)) return t;
  SEXTANT_ASSIGN_OR_RETURN(std::optional<double> exact, DerivedTime(*db_, key));
  if (exact) return exact;
  double rounded = 0;
  if (absl::SimpleAtod(*text, &rounded)) return std::optional<double>(rounded);
  return absl::DataLossError(absl::StrCat("store: the run's ", key, " is not a time: ", *text));
}

absl::Status Store::Begin() { return db_->Exec("BEGIN IMMEDIATE"); }
absl::Status Store::Commit() { return db_->Exec("COMMIT"); }
void Store::Rollback() { (void)db_->Exec("ROLLBACK"); }
bool Store::InTransaction() const { return db_->InTransaction(); }

absl::Status Store::PutMeta(const std::string& key, const std::string& value) {
  return db_->Run("put meta", "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", key,
                  Blob{value});
}

absl::StatusOr<std::optional<std::string>> Store::GetMeta(const std::string& key) {
  SEXTANT_ASSIGN_OR_RETURN(Statement q, db_->Query("SELECT value FROM meta WHERE key = ?", key));
  SEXTANT_ASSIGN_OR_RETURN(bool row, q.Next("get meta"));
  if (!row) return std::optional<std::string>();
  return std::optional<std::string>(q.Bytes(0));
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
  return db_->Run(
      "put trial",
      "INSERT OR REPLACE INTO trials(id, state, params, attempts, failures, value, error,"
      " created_at, finished_at, fidelity, target, rungs, scratch_restarts, paused,"
      " preemptions, outcome) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      t.id, TrialStateName(t.state), t.params_json, t.attempts, t.failures, t.value, t.error,
      t.created_at, t.finished_at, t.fidelity, t.target, t.rungs_json, t.scratch_restarts, t.paused,
      t.preemptions, OutcomeJson(t));
}

absl::StatusOr<std::vector<TrialRow>> Store::LoadTrials() {
  SEXTANT_ASSIGN_OR_RETURN(
      Statement q,
      db_->Query(has_outcome_
                     ? "SELECT id, state, params, attempts, failures, value, error, created_at,"
                       " finished_at, fidelity, target, rungs, scratch_restarts, paused,"
                       " preemptions, outcome FROM trials ORDER BY id"
                     : "SELECT id, state, params, attempts, failures, value, error, created_at,"
                       " finished_at, fidelity, target, rungs, scratch_restarts, paused,"
                       " preemptions, '{}' FROM trials ORDER BY id"));
  std::vector<TrialRow> out;
  while (true) {
    SEXTANT_ASSIGN_OR_RETURN(bool row, q.Next("load trials"));
    if (!row) return out;
    TrialRow t;
    t.id = q.Int(0);
    const std::string state = q.Text(1);
    if (!v1::TrialState_Parse(state, &t.state) || t.state == v1::TRIAL_STATE_UNSPECIFIED) {
      return absl::DataLossError(
          absl::StrCat("trial ", t.id, " has the unknown state '", state.substr(0, 64), "'"));
    }
    t.params_json = q.Text(2);
    t.attempts = static_cast<int>(q.Int(3));
    t.failures = static_cast<int>(q.Int(4));
    t.value = q.MaybeReal(5);
    t.error = q.Text(6);
    t.created_at = q.Real(7);
    t.finished_at = q.Real(8);
    t.fidelity = q.Real(9);
    t.target = q.Real(10);
    t.rungs_json = q.Text(11);
    t.scratch_restarts = static_cast<int>(q.Int(12));
    t.paused = q.Int(13) != 0;
    t.preemptions = static_cast<int>(q.Int(14));
    ReadOutcomeJson(q.Text(15), &t);
    out.push_back(std::move(t));
  }
}

absl::Status Store::StartAttempt(int64_t trial_id, int attempt, int64_t worker_id, double time) {
  return db_->Run("start attempt",
                  "INSERT OR REPLACE INTO attempts(trial_id, attempt, worker_id, started_at)"
                  " VALUES(?, ?, ?, ?)",
                  trial_id, attempt, worker_id, time);
}

absl::Status Store::FinishAttempt(int64_t trial_id, int attempt, v1::AttemptOutcome outcome,
                                  int exit_code, const std::string& error, double time) {
  return db_->Run("finish attempt",
                  "UPDATE attempts SET finished_at = ?, outcome = ?, exit_code = ?, error = ?"
                  " WHERE trial_id = ? AND attempt = ?",
                  time, AttemptOutcomeName(outcome), exit_code, error, trial_id, attempt);
}

absl::StatusOr<std::optional<AttemptRow>> Store::LoadAttempt(int64_t trial_id, int attempt) {
  SEXTANT_ASSIGN_OR_RETURN(
      Statement q,
      db_->Query("SELECT worker_id, started_at, finished_at, outcome, exit_code, error FROM"
                 " attempts WHERE trial_id = ? AND attempt = ?",
                 trial_id, attempt));
  SEXTANT_ASSIGN_OR_RETURN(bool row, q.Next("load attempt"));
  if (!row) return std::nullopt;
  AttemptRow a;
  a.trial_id = trial_id;
  a.attempt = attempt;
  a.worker_id = q.Int(0);
  a.started_at = q.Real(1);
  a.finished_at = q.MaybeReal(2);
  a.outcome = ParseAttemptOutcome(q.Text(3));
  a.exit_code = static_cast<int>(q.Int(4));
  a.error = q.Text(5);
  return a;
}

absl::StatusOr<bool> Store::AddMeasurement(const MeasurementRow& m) {
  SEXTANT_RETURN_IF_ERROR(
      db_->Run("add measurement",
               "INSERT OR IGNORE INTO measurements(trial_id, attempt, seq, elapsed, metrics)"
               " VALUES(?, ?, ?, ?, ?)",
               m.trial_id, m.attempt, m.sequence, m.elapsed, m.metrics_json));
  return db_->Changes() > 0;
}

absl::StatusOr<std::vector<MeasurementRow>> Store::LoadMeasurements(int64_t trial_id) {
  SEXTANT_ASSIGN_OR_RETURN(
      Statement q, db_->Query("SELECT trial_id, attempt, seq, elapsed, metrics FROM measurements"
                              " WHERE ?1 = 0 OR trial_id = ?1 ORDER BY trial_id, attempt, seq",
                              trial_id));
  return Rows<MeasurementRow>(q, "load measurements", [](const Statement& r) {
    return MeasurementRow{r.Int(0), static_cast<int>(r.Int(1)), r.Int(2), r.Real(3), r.Text(4)};
  });
}

absl::Status Store::AddEvent(double time, const std::string& kind, int64_t trial_id,
                             const std::string& message) {
  return db_->Run("add event",
                  "INSERT INTO events(time, kind, trial_id, message) VALUES(?, ?, ?, ?)", time,
                  kind, trial_id, message);
}

absl::Status Store::ReplaceCosts(const std::vector<CostRow>& rows) {
  return WithinTransaction(this, [&]() -> absl::Status {
    SEXTANT_RETURN_IF_ERROR(db_->Exec("DELETE FROM costs"));
    for (const CostRow& c : rows) {
      SEXTANT_RETURN_IF_ERROR(
          db_->Run("add cost",
                   "INSERT INTO costs(kind, ref, pool, region, market, start, end, cost)"
                   " VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
                   c.kind, c.ref, c.pool, c.region, c.market, c.start, c.end, c.cost));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<CostRow>> Store::LoadCosts() {
  SEXTANT_ASSIGN_OR_RETURN(
      Statement q, db_->Query("SELECT kind, ref, pool, region, market, start, end, cost FROM costs"
                              " ORDER BY rowid"));
  return Rows<CostRow>(q, "load costs", [](const Statement& r) {
    return CostRow{r.Text(0), r.Int(1),  r.Text(2), r.Text(3),
                   r.Text(4), r.Real(5), r.Real(6), r.Real(7)};
  });
}

absl::StatusOr<std::vector<EventRow>> Store::LoadEvents(int64_t after_id, int limit) {
  SEXTANT_ASSIGN_OR_RETURN(Statement q,
                           db_->Query("SELECT id, time, kind, trial_id, message FROM events"
                                      " WHERE id > ? ORDER BY id LIMIT ?",
                                      after_id, limit > 0 ? int64_t{limit} : int64_t{-1}));
  return Rows<EventRow>(q, "load events", [](const Statement& r) {
    return EventRow{r.Int(0), r.Real(1), r.Text(2), r.Int(3), r.Text(4)};
  });
}

absl::Status Store::AddWorker(int64_t id, const std::string& region, const std::string& pool,
                              const std::string& hostname, int64_t pid, double time) {
  return db_->Run("add worker",
                  "INSERT OR REPLACE INTO workers(id, region, pool, hostname, pid, registered_at)"
                  " VALUES(?, ?, ?, ?, ?, ?)",
                  id, region, pool, hostname, pid, time);
}

absl::StatusOr<int64_t> Store::MaxWorkerId() {
  SEXTANT_ASSIGN_OR_RETURN(Statement q, db_->Query("SELECT COALESCE(MAX(id), 0) FROM workers"));
  SEXTANT_ASSIGN_OR_RETURN(bool row, q.Next("max worker id"));
  if (!row) return db_->Error("max worker id");
  return q.Int(0);
}

absl::Status Store::AddTelemetry(const TelemetryRow& t) {
  return db_->Run(
      "add telemetry",
      "INSERT INTO telemetry(time, worker_id, trial_id, cpu_percent, rss_bytes, gpu_count,"
      " gpu_utilization, gpu_memory_bytes, gpu_memory_total_bytes)"
      " VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
      t.time, t.worker_id, t.trial_id, t.cpu_percent, t.rss_bytes, t.gpu_count, t.gpu_utilization,
      t.gpu_memory_bytes, t.gpu_memory_total_bytes);
}

absl::StatusOr<std::vector<TelemetryRow>> Store::LoadTelemetry(bool latest_only) {
  SEXTANT_ASSIGN_OR_RETURN(
      Statement q,
      db_->Query("SELECT time, worker_id, trial_id, cpu_percent, rss_bytes, gpu_count,"
                 " gpu_utilization, gpu_memory_bytes, gpu_memory_total_bytes FROM telemetry t"
                 " WHERE ?1 = 0 OR time = (SELECT MAX(time) FROM telemetry u"
                 " WHERE u.worker_id = t.worker_id) ORDER BY worker_id, time",
                 latest_only));
  return Rows<TelemetryRow>(q, "load telemetry", [](const Statement& r) {
    return TelemetryRow{r.Real(0), r.Int(1), r.Int(2),
                        r.Real(3), r.Int(4), static_cast<int>(r.Int(5)),
                        r.Real(6), r.Int(7), r.Int(8)};
  });
}

}  // namespace sextant
