#ifndef SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_STORAGE_H_
#define SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_STORAGE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sextant {

// One parameter distribution as Optuna stores it (trial_params.distribution_json), with the
// legacy names of Optuna < 3.0 folded onto the current three.
struct OptunaDistribution {
  enum class Kind { kFloat, kInt, kCategorical };
  Kind kind = Kind::kFloat;
  std::string name;            // as stored: "FloatDistribution", "LogUniformDistribution", ...
  double low = 0, high = 0;    // float and int
  bool log = false;            // float and int
  std::optional<double> step;  // float: the step or q; int: the step (1 for none)
  nlohmann::json choices;      // categorical: the choices, as stored (a JSON array)
  nlohmann::json stored;       // the whole distribution_json, parsed
};

// Parses a distribution_json text. Accepts FloatDistribution, IntDistribution,
// CategoricalDistribution and the legacy UniformDistribution, LogUniformDistribution,
// DiscreteUniformDistribution, IntUniformDistribution, IntLogUniformDistribution.
// Returns InvalidArgument naming an unknown distribution, or saying which attribute is missing
// or malformed.
absl::StatusOr<OptunaDistribution> ParseOptunaDistribution(const std::string& json);

// One trial_params row.
struct OptunaParam {
  std::string name;
  double internal = 0;  // param_value: the value, or a categorical's index into its choices
  OptunaDistribution distribution;
};

// One trial of a study, with everything the storage holds about it.
struct OptunaTrial {
  int64_t trial_id = 0;  // unique across the storage's studies
  int64_t number = 0;    // 0-based within the study
  std::string state;     // RUNNING | COMPLETE | PRUNED | FAIL | WAITING
  // As stored: SQLite "2024-05-01 12:00:00.123456" (naive), a journal's ISO 8601 text
  // ("2024-05-01T12:00:00.123456+00:00" from Optuna 5, naive before). May be empty.
  std::string datetime_start;
  std::string datetime_complete;
  // The same as Unix seconds, read in the zone the writer used (SQLite: local time before
  // Optuna 5, UTC from Optuna 5 on, as version_info.library_version says; a journal: its
  // offset, else local time); 0 when absent or unreadable.
  double started_at = 0;
  double completed_at = 0;
  std::vector<OptunaParam> params;  // in suggestion order
  // By objective index; nullopt when the objective has no stored value. +-inf as stored by
  // value_type INF_POS / INF_NEG.
  std::vector<std::optional<double>> values;
  std::vector<std::pair<int64_t, double>> intermediate;  // (step, value) by step; NaN allowed
  nlohmann::json user_attrs = nlohmann::json::object();  // key -> parsed value_json
  nlohmann::json system_attrs = nlohmann::json::object();
};

struct OptunaStudy {
  std::string storage;  // the file it was read from
  std::string format;   // "SQLite" or "journal"
  int64_t study_id = 0;
  std::string name;
  std::vector<std::string> directions;  // MINIMIZE | MAXIMIZE, by objective index
  nlohmann::json user_attrs = nlohmann::json::object();
  nlohmann::json system_attrs = nlohmann::json::object();
  std::vector<OptunaTrial> trials;  // by number
  // SQLite only (empty or 0 for a journal, which stores no version):
  int schema_version = 0;       // version_info.schema_version
  std::string library_version;  // version_info.library_version (the Optuna that created it)
  std::string alembic_version;  // alembic_version.version_num, e.g. "v3.2.0.a"
};

// Bounds on what ReadOptunaStudy reads, each checked before the memory is taken, so that no
// storage can make the import allocate, recurse or run without limit.
inline constexpr int kMaxOptunaValueBytes = 4 << 20;  // one stored value (SQLITE_LIMIT_LENGTH)
inline constexpr int64_t kMaxOptunaTextBytes = int64_t{256} << 20;  // all text read together
inline constexpr int64_t kMaxOptunaRows = 2'000'000;             // rows read, all tables together
inline constexpr size_t kMaxOptunaNameBytes = 1024;              // a name, key, state or version
inline constexpr int kMaxOptunaJsonDepth = 64;                   // nesting of a stored JSON value
inline constexpr size_t kMaxOptunaObjectives = 64;               // a study's directions
inline constexpr int64_t kMaxOptunaSqliteSteps = 2'000'000'000;  // SQLite VM steps in all

// The alembic revisions whose tables ReadOptunaStudy reads: Optuna 2.4 to 5.x (v2.4.0.a
// introduced several objectives; v3.0.0.d is Optuna 3.0 and 3.1's; v3.2.0.a, an index on
// trials.study_id, is what Optuna 3.2 to 5.x write).
const std::vector<std::string>& SupportedOptunaSchemas();

// Reads one study of an Optuna RDB storage in SQLite, read-only, with the SQLite C API.
// Errors (all InvalidArgument, naming the file): the file cannot be opened, is not an SQLite
// database or is corrupt, has no Optuna tables, has a schema version not in
// SupportedOptunaSchemas() (naming it), holds no study called `study` (listing the studies it
// holds; an empty `study` names the storage's only study, and is an error listing them when it
// holds several), or holds a row that cannot be read (a distribution ParseOptunaDistribution
// refuses, a categorical index out of range, malformed attribute JSON).
// Hostile storages are refused the same way, the message naming the table and the row: an
// id that is not an INTEGER or names no trial or study of the storage (every table that
// references one is checked, trial_heartbeats included), any value of another type than
// Optuna writes there (text where a number belongs, a blob, a NULL where one is required, a
// non-finite parameter value), text that is not UTF-8, an objective index past the study's
// directions, JSON nested deeper than kMaxOptunaJsonDepth, or anything past the bounds
// above.
absl::StatusOr<OptunaStudy> ReadOptunaStudy(const std::string& path, const std::string& study);

// Reads one study of an Optuna storage file of either kind, told apart by content: a file
// that starts with SQLite's header is read by ReadOptunaStudy, an empty one or one whose first
// byte is '{' by ReadOptunaJournal (orchestrator/import/optuna_journal.h). InvalidArgument
// naming the file when it cannot be opened or is neither, and the reader's errors otherwise.
absl::StatusOr<OptunaStudy> ReadOptunaStorage(const std::string& path, const std::string& study);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_STORAGE_H_
