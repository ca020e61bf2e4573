// Fuzz target: `sextant import optuna` on a hostile storage. The input is SQL, run statement by
// statement (a failing one is skipped) into a fresh SQLite file, which ImportOptunaStudy then
// imports into a fresh directory. The seeds (corpus/optuna_storage_fuzz) are dumps of a study
// that Optuna 3.1 wrote (Python's sqlite3 iterdump) and the rows that once crashed or injected
// into the importer: a trial id kept as text that matches another trial by SQL affinity, rows
// of trials that do not exist, values of the wrong type, and strings carrying YAML.
// Invariants: the import never crashes or hangs (it succeeds or returns an error), and when it
// succeeds experiment.yaml loads as the spec it stored, with no block the importer did not
// write (a budget).
#include <sqlite3.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/import/optuna_import.h"

namespace {

namespace fs = std::filesystem;

// The statements the input may run: building tables and rows, nothing that reaches another
// file (ATTACH, VACUUM INTO) or changes the connection (PRAGMA).
int Authorize(void*, int action, const char*, const char*, const char*, const char*) {
  switch (action) {
    case SQLITE_CREATE_INDEX:
    case SQLITE_CREATE_TABLE:
    case SQLITE_CREATE_VIEW:
    case SQLITE_DELETE:
    case SQLITE_DROP_INDEX:
    case SQLITE_DROP_TABLE:
    case SQLITE_INSERT:
    case SQLITE_READ:
    case SQLITE_SELECT:
    case SQLITE_TRANSACTION:
    case SQLITE_UPDATE:
    case SQLITE_ALTER_TABLE:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    default:
      return SQLITE_DENY;
  }
}

// Stops a statement of the input after about ten million steps.
int Progress(void* steps) { return ++*static_cast<int*>(steps) > 10'000 ? 1 : 0; }

// Runs sql into a new database at path, one statement at a time.
void Build(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    return;
  }
  sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 8 << 20);
  sqlite3_set_authorizer(db, &Authorize, nullptr);
  int steps = 0;
  sqlite3_progress_handler(db, 1000, &Progress, &steps);
  const char* tail = sql.c_str();
  const char* end = tail + sql.size();
  while (tail < end && *tail != '\0') {
    sqlite3_stmt* s = nullptr;
    const char* next = nullptr;
    if (sqlite3_prepare_v2(db, tail, static_cast<int>(end - tail), &s, &next) != SQLITE_OK ||
        next == nullptr || next <= tail) {
      // Skip past the next ';' and go on: one bad statement should not hide the rest.
      const char* semi = static_cast<const char*>(memchr(tail, ';', end - tail));
      sqlite3_finalize(s);
      if (semi == nullptr) break;
      tail = semi + 1;
      continue;
    }
    if (s != nullptr) {
      steps = 0;
      while (sqlite3_step(s) == SQLITE_ROW) {
      }
      sqlite3_finalize(s);
    }
    tail = next;
  }
  sqlite3_close(db);
}

const std::string& WorkDir() {
  static const std::string* dir = [] {
    std::string pattern = (fs::temp_directory_path() / "optuna_storage_fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) abort();
    return new std::string(pattern);
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& work = WorkDir();
  const std::string db = work + "/study.db";
  const std::string out = work + "/run";
  std::error_code ec;
  fs::remove(db, ec);
  fs::remove_all(out, ec);
  Build(db, std::string(reinterpret_cast<const char*>(data), size));

  sextant::OptunaImportOptions options;
  options.storage = db;
  options.output_dir = out;
  sextant::FakeClock clock;
  absl::StatusOr<sextant::OptunaImportSummary> r = sextant::ImportOptunaStudy(options, &clock);
  if (r.ok()) {
    sextant::LoadResult loaded = sextant::LoadExperimentFile(out + "/experiment.yaml");
    if (!loaded.ok()) {
      std::fprintf(stderr, "an imported experiment.yaml does not load: %s\n",
                   loaded.errors.front().ToString().c_str());
      abort();
    }
    if (loaded.spec.budget().has_max_cost() || loaded.spec.budget().max_wall_time_seconds() > 0) {
      std::fprintf(stderr, "an imported experiment.yaml holds a budget\n");
      abort();
    }
  }
  fs::remove(db, ec);
  fs::remove_all(out, ec);
  return 0;
}
