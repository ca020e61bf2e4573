#include "orchestrator/report/report_data.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "orchestrator/core/results.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/warm_start.h"

namespace sextant {
namespace {

// A read-only SQLite handle for the tables the Store has no loader for (attempts, workers) and
// for the optional tables, which are probed through sqlite_master.
class RawReader {
 public:
  static absl::StatusOr<RawReader> Open(const std::string& path) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) !=
        SQLITE_OK) {
      std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
      sqlite3_close(db);
      return absl::InternalError(absl::StrCat(path, ": ", msg));
    }
    sqlite3_busy_timeout(db, 5000);
    return RawReader(db);
  }
  RawReader(RawReader&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  ~RawReader() { sqlite3_close(db_); }

  // Each row as a JSON object keyed by column name (NULL as null). At most limit rows.
  absl::StatusOr<std::vector<nlohmann::json>> Query(const std::string& sql, int limit = 1 << 20) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
      return absl::InternalError(absl::StrCat("store: ", sqlite3_errmsg(db_)));
    }
    std::vector<nlohmann::json> rows;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW && static_cast<int>(rows.size()) < limit) {
      nlohmann::json row = nlohmann::json::object();
      for (int i = 0; i < sqlite3_column_count(s); ++i) {
        std::string name = sqlite3_column_name(s, i);
        switch (sqlite3_column_type(s, i)) {
          case SQLITE_INTEGER:
            row[name] = sqlite3_column_int64(s, i);
            break;
          case SQLITE_FLOAT:
            row[name] = sqlite3_column_double(s, i);
            break;
          case SQLITE_NULL:
            row[name] = nullptr;
            break;
          default: {
            const unsigned char* t = sqlite3_column_text(s, i);
            row[name] =
                std::string(t ? reinterpret_cast<const char*>(t) : "", sqlite3_column_bytes(s, i));
          }
        }
      }
      rows.push_back(std::move(row));
    }
    bool ok = rc == SQLITE_DONE || rc == SQLITE_ROW;
    sqlite3_finalize(s);
    if (!ok) return absl::InternalError(absl::StrCat("store: ", sqlite3_errmsg(db_)));
    return rows;
  }

 private:
  explicit RawReader(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

// The first of keys that holds a number (or a numeric string).
std::optional<double> Number(const nlohmann::json& row, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (!row.contains(k)) continue;
    const nlohmann::json& v = row[k];
    if (v.is_number()) return v.get<double>();
    double d;
    if (v.is_string() && absl::SimpleAtod(v.get<std::string>(), &d)) return d;
  }
  return std::nullopt;
}

std::string Text(const nlohmann::json& row, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (row.contains(k) && row[k].is_string()) return row[k].get<std::string>();
    if (row.contains(k) && row[k].is_number()) return row[k].dump();
  }
  return "";
}

bool Has(const std::vector<std::string>& tables, const std::string& name) {
  return std::find(tables.begin(), tables.end(), name) != tables.end();
}

absl::Status LoadCore(RawReader& db, ReportData& d) {
  SEXTANT_ASSIGN_OR_RETURN(auto attempts,
                           db.Query("SELECT trial_id, attempt, worker_id, started_at, finished_at,"
                                    " outcome FROM attempts ORDER BY started_at"));
  for (const auto& r : attempts) {
    AttemptRecord a;
    a.trial_id = r["trial_id"].get<int64_t>();
    a.attempt = static_cast<int>(r["attempt"].get<int64_t>());
    a.worker_id = r["worker_id"].get<int64_t>();
    a.started_at = Number(r, {"started_at"}).value_or(0);
    a.finished_at = Number(r, {"finished_at"});
    a.outcome = ParseAttemptOutcome(Text(r, {"outcome"}));
    d.attempts.push_back(std::move(a));
  }
  SEXTANT_ASSIGN_OR_RETURN(
      auto workers,
      db.Query("SELECT id, region, pool, hostname, registered_at FROM workers ORDER BY id"));
  for (const auto& r : workers) {
    d.workers.push_back(WorkerRecord{r["id"].get<int64_t>(), Text(r, {"region"}), Text(r, {"pool"}),
                                     Text(r, {"hostname"}),
                                     Number(r, {"registered_at"}).value_or(0)});
  }
  return absl::OkStatus();
}

// Reads whichever optional tables exist. A table that is present but unreadable becomes a note
// rather than an error: the rest of the report is still worth having.
void LoadOptional(RawReader& db, ReportData& d) {
  auto read = [&](const std::string& table) -> std::vector<nlohmann::json> {
    if (!Has(d.tables, table)) return {};
    auto rows = db.Query(absl::StrCat("SELECT * FROM \"", table, "\""), 500000);
    if (!rows.ok()) {
      d.notes.push_back(
          absl::StrCat("table ", table, " could not be read: ", rows.status().message()));
      return {};
    }
    return *std::move(rows);
  };
  for (const auto& r : read("costs")) {
    auto a = Number(r, {"cost", "amount"});
    if (!a) continue;
    std::string kind = Text(r, {"kind"});
    if (kind == "trial") continue;  // attribution of instance cost, already counted
    auto start = Number(r, {"start"}), end = Number(r, {"end"});
    if (auto t = Number(r, {"time", "at"}); t && !start) start = end = *t - d.started_at;
    if (!start) continue;
    if (kind == "reservation" || !end || *end < *start) end = start;
    d.costs.push_back(CostRecord{*start, *end, Text(r, {"pool"}), *a});
  }
  for (const auto& r : read("telemetry")) {
    auto t = Number(r, {"time", "at", "timestamp"});
    auto w = Number(r, {"worker_id", "worker"});
    if (!t || !w) continue;
    TelemetryRecord rec{*t, static_cast<int64_t>(*w), std::nullopt, std::nullopt};
    auto gpus = Number(r, {"gpu_count"});
    auto u = Number(r, {"gpu_utilization", "gpu_util"});
    if (u && (!gpus || *gpus > 0)) rec.gpu_util = std::clamp(*u / 100.0, 0.0, 1.0);
    if (auto c = Number(r, {"cpu_percent"})) rec.cpu_util = std::max(0.0, *c / 100.0);
    if (rec.gpu_util || rec.cpu_util) d.telemetry.push_back(rec);
  }
  if (Has(d.tables, "rounds")) {
    absl::StatusOr<RoundsTable> table = RoundsTable::OpenReadOnly(RunDir::DbPath(d.run_dir));
    absl::StatusOr<std::vector<RoundRow>> rows =
        table.ok() ? table->Load() : absl::StatusOr<std::vector<RoundRow>>(table.status());
    if (rows.ok()) {
      d.rounds = *std::move(rows);
    } else {
      d.notes.push_back(absl::StrCat("table rounds could not be read: ", rows.status().message()));
    }
  }
}

}  // namespace

bool RunDirIsLocked(const std::string& run_dir) {
  int fd = open((run_dir + "/lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool locked = flock(fd, LOCK_SH | LOCK_NB) != 0;
  if (!locked) flock(fd, LOCK_UN);
  close(fd);
  return locked;
}

absl::StatusOr<ReportData> LoadReportData(const std::string& run_dir, absl::Time now) {
  std::error_code ec;
  if (!std::filesystem::is_directory(run_dir, ec)) {
    return absl::NotFoundError(absl::StrCat(run_dir, ": no such directory"));
  }
  if (!std::filesystem::exists(RunDir::DbPath(run_dir), ec)) {
    return absl::NotFoundError(
        absl::StrCat(run_dir, ": not a Sextant run directory (it has no state.db)"));
  }
  ReportData d;
  d.run_dir = run_dir;
  d.generated_at = absl::ToDoubleSeconds(now - absl::UnixEpoch());
  // Probe the lock first: a run that ends while we read is then reported as in progress,
  // which is the safe side.
  d.in_progress = RunDirIsLocked(run_dir);
  SEXTANT_ASSIGN_OR_RETURN(d.results, LoadResults(run_dir));
  SEXTANT_ASSIGN_OR_RETURN(auto store, Store::Open(RunDir::DbPath(run_dir), false, true));
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> spec, store->GetMeta("spec"));
  if (!spec || !d.spec.ParseFromString(*spec)) {
    return absl::NotFoundError(absl::StrCat(run_dir, ": not a Sextant run directory (no spec)"));
  }
  SEXTANT_ASSIGN_OR_RETURN(d.state, store->GetRunState());
  SEXTANT_ASSIGN_OR_RETURN(d.trials, store->LoadTrials());
  SEXTANT_ASSIGN_OR_RETURN(d.measurements, store->LoadMeasurements());
  SEXTANT_ASSIGN_OR_RETURN(d.events, store->LoadEvents());
  SEXTANT_ASSIGN_OR_RETURN(d.warm_start, LoadStoredWarmStart(store.get(), d.spec));
  SEXTANT_ASSIGN_OR_RETURN(RawReader db, RawReader::Open(RunDir::DbPath(run_dir)));
  SEXTANT_ASSIGN_OR_RETURN(
      auto tables, db.Query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"));
  for (const auto& t : tables) d.tables.push_back(Text(t, {"name"}));
  SEXTANT_RETURN_IF_ERROR(LoadCore(db, d));

  SEXTANT_ASSIGN_OR_RETURN(std::optional<double> started, store->GetTimeMeta("started_at"));
  if (started && *started > 0) {
    d.started_at = *started;
  } else {
    d.started_at = d.generated_at;
    for (const TrialRow& t : d.trials) d.started_at = std::min(d.started_at, t.created_at);
  }
  // Runs of older versions stored started_at in whole seconds; never let a record fall before
  // the origin.
  for (const TrialRow& t : d.trials) d.started_at = std::min(d.started_at, t.created_at);
  for (const AttemptRecord& a : d.attempts) d.started_at = std::min(d.started_at, a.started_at);
  LoadOptional(db, d);
  return d;
}

}  // namespace sextant
