// Fuzz target: `sextant import optuna` on a hostile journal file (Optuna's JournalFileBackend
// log). The input is the file's bytes, imported into a fresh directory. The seeds
// (corpus/optuna_journal_fuzz) are the journals Optuna 3.1 and 5 wrote for the format tests
// (tests/data/optuna) and lines that bend the replay rules: unknown op codes, ids out of range,
// a trial finished twice, NaN and Infinity as bare words, deep nesting, a line cut short.
// Invariants: the import never crashes or hangs (it succeeds or returns an error), and when it
// succeeds experiment.yaml loads, with no block the importer did not write (a budget).
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/import/optuna_import.h"

namespace {

namespace fs = std::filesystem;

const std::string& WorkDir() {
  static const std::string* dir = [] {
    std::string pattern = (fs::temp_directory_path() / "optuna_journal_fuzz-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) abort();
    return new std::string(pattern);
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& work = WorkDir();
  const std::string journal = work + "/optuna.log";
  const std::string out = work + "/run";
  std::error_code ec;
  fs::remove_all(out, ec);
  std::ofstream(journal, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));

  sextant::OptunaImportOptions options;
  options.storage = journal;
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
  fs::remove(journal, ec);
  fs::remove_all(out, ec);
  return 0;
}
