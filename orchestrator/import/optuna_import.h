#ifndef SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_IMPORT_H_
#define SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_IMPORT_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace sextant {

// `sextant import optuna STORAGE [--study NAME] [-o DIR] [--metric NAME[,NAME...]]`.
struct OptunaImportOptions {
  // The Optuna storage file: SQLite, as a path or as Optuna's storage URL (sqlite:///FILE), or
  // a journal file (JournalFileBackend's log), as a path; told apart by content. Required.
  std::string storage;
  // The study's name. Empty (the default): the storage's only study.
  std::string study;
  std::string output_dir;  // default: runs/<the study's name in [a-z0-9_-]>
  // The objectives' metric names, one per objective. Default: the study's metric names when
  // it stores them (Optuna >= 3.2's set_metric_names), else "value" for one objective and
  // "values_0", "values_1", ... for several (the columns of Optuna's trials_dataframe).
  std::vector<std::string> metrics;
  // search.max_trials of the run written; the imported trials count toward it. 0 (the
  // default): their number plus kImportedRoom, so that the study goes on as an Optuna study
  // does (sextant resume --max-trials changes it later).
  int max_trials = 0;
};

// The trials an imported study may add by default (OptunaImportOptions::max_trials).
inline constexpr int kImportedRoom = 100;
// The trials an imported study's askers may hold at once (search.max_concurrent).
inline constexpr int kImportedConcurrent = 8;

// What an import wrote.
struct OptunaImportSummary {
  std::string study;            // the study imported (named, or the storage's only one)
  std::string run_dir;          // the directory written
  std::string experiment_file;  // run_dir/experiment.yaml
  int trials = 0;               // trials imported
  int completed = 0;            // of them COMPLETED
  int max_trials = 0;           // search.max_trials of the run written
  // Optuna's numbers of the first and last trial; Sextant's ids are these + 1. Each trial
  // that ran keeps its number as the metric "optuna_number".
  int64_t first_number = 0;
  int64_t last_number = 0;
  std::vector<std::string> notes;  // what did not map one to one (steps, renames, constants)
};

// The file of an Optuna storage: a path as it is, or Optuna's SQLite URL sqlite:///FILE
// (sqlite:////abs/path for an absolute one; a ?query is dropped). InvalidArgument for another
// URL (mysql://, postgresql://, ...), saying how to copy the study into SQLite.
absl::StatusOr<std::string> OptunaStoragePath(const std::string& storage);

// Reads the study (ReadOptunaStorage in orchestrator/import/optuna_storage.h) and writes a Sextant
// run directory: state.db through Store (the spec, the trials, their measurements, attempts and
// events, and meta "optuna_import" with everything Optuna stored that has no Sextant column) and
// experiment.yaml. The directory is built beside the target under a temporary name and renamed
// into place at the end, so on any error nothing is left behind. How Optuna's study maps onto a
// Sextant run is described in docs/ask-tell.md ("Importing Optuna studies").
// The run is in ask/tell mode (search.mode: ask_tell), as an Optuna study is driven.
// Errors: InvalidArgument for a storage or study that cannot be imported (the message names
// the file, the study, the distribution, the schema version or the parameter; without a
// study name, a storage with several studies, listing them) or a max_trials
// below the number of trials;
// AlreadyExists when the output directory exists and is not empty; Internal when writing fails.
absl::StatusOr<OptunaImportSummary> ImportOptunaStudy(const OptunaImportOptions& options,
                                                      Clock* clock);

// The command: runs ImportOptunaStudy and prints what it wrote (out) or the error (err).
// Returns the exit code: 0 imported, 2 bad input (including an existing output directory),
// 1 other failures.
int RunOptunaImport(const OptunaImportOptions& options, Clock* clock, std::ostream& out,
                    std::ostream& err);

// The default output directory's name for a study: lower case, each run of characters outside
// [a-z0-9_-] replaced by one '-', '-' trimmed at both ends; "optuna-study" when nothing is left.
std::string SanitizedStudyName(const std::string& study);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_IMPORT_H_
