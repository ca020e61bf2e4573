#include "orchestrator/import/optuna_storage.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "orchestrator/import/internal/python_json.h"
#include "orchestrator/import/internal/study_choice.h"
#include "orchestrator/import/internal/yaml_scalar.h"
#include "orchestrator/import/optuna_journal.h"

namespace sextant {
namespace {

using Json = nlohmann::json;

// The tables every supported schema has.
constexpr const char* kTables[] = {"studies",
                                   "study_directions",
                                   "study_user_attributes",
                                   "study_system_attributes",
                                   "trials",
                                   "trial_params",
                                   "trial_values",
                                   "trial_intermediate_values",
                                   "trial_user_attributes",
                                   "trial_system_attributes",
                                   "version_info",
                                   "alembic_version"};

// A read-only connection and the statements run on it; every failure becomes InvalidArgument
// naming the file, because a storage that SQLite cannot read is bad input, not our fault.
// SQLITE_LIMIT_LENGTH bounds each value before SQLite allocates it, the progress handler
// bounds the work of all statements together, and Query counts the rows read.
class Db {
 public:
  explicit Db(std::string path) : path_(std::move(path)) {}
  ~Db() { sqlite3_close(db_); }

  absl::Status Open() {
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": cannot open: ", db_ ? sqlite3_errmsg(db_) : "out of memory"));
    }
    sqlite3_limit(db_, SQLITE_LIMIT_LENGTH, kMaxOptunaValueBytes);
    sqlite3_progress_handler(db_, kStepsPerCall, &Db::Progress, this);
    return absl::OkStatus();
  }

  const std::string& path() const { return path_; }

  // Runs sql with the given integer binds and calls row(stmt) for each result row.
  template <typename F>
  absl::Status Query(const std::string& sql, std::initializer_list<int64_t> binds, F&& row) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return Error();
    int i = 1;
    for (int64_t b : binds) sqlite3_bind_int64(s, i++, b);
    int rc;
    absl::Status status;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      if (++rows_ > kMaxOptunaRows) {
        status = absl::InvalidArgumentError(
            absl::StrCat(path_, ": holds more than ", kMaxOptunaRows, " rows to import"));
      }
      if (status.ok()) status = row(s);
      if (!status.ok()) break;
    }
    if (status.ok() && rc != SQLITE_DONE) status = Error();
    sqlite3_finalize(s);
    return status;
  }

  absl::Status Error() const {
    const int code = sqlite3_errcode(db_);
    if (code == SQLITE_TOOBIG) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": holds a value larger than ", kMaxOptunaValueBytes, " bytes"));
    }
    if (code == SQLITE_INTERRUPT) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": reading it took more than ",
                                                     kMaxOptunaSqliteSteps, " SQLite steps"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": not a readable SQLite database (", sqlite3_errmsg(db_), ")"));
  }

  // Counts text read against kMaxOptunaTextBytes.
  absl::Status Take(size_t bytes) {
    text_bytes_ += static_cast<int64_t>(bytes);
    if (text_bytes_ <= kMaxOptunaTextBytes) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": holds more than ", kMaxOptunaTextBytes, " bytes of text to import"));
  }

 private:
  static constexpr int kStepsPerCall = 10'000;

  static int Progress(void* self) {
    Db* db = static_cast<Db*>(self);
    db->steps_ += kStepsPerCall;
    return db->steps_ > kMaxOptunaSqliteSteps ? 1 : 0;
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  int64_t rows_ = 0;
  int64_t text_bytes_ = 0;
  int64_t steps_ = 0;
};

// A stored value for an error message: short, quoted, with controls escaped.
std::string Shown(sqlite3_stmt* s, int i) {
  switch (sqlite3_column_type(s, i)) {
    case SQLITE_NULL:
      return "NULL";
    case SQLITE_INTEGER:
      return absl::StrCat(sqlite3_column_int64(s, i));
    case SQLITE_FLOAT:
      return absl::StrCat(sqlite3_column_double(s, i));
    case SQLITE_BLOB:
      return absl::StrCat("a blob of ", sqlite3_column_bytes(s, i), " bytes");
    default: {
      const char* t = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
      const size_t n = static_cast<size_t>(sqlite3_column_bytes(s, i));
      std::string shown =
          YamlQuoted(absl::string_view(t ? t : "", t ? std::min<size_t>(n, 40) : 0));
      return n > 40 ? absl::StrCat(shown, "...") : shown;
    }
  }
}

// One result row of a table, read strictly. A value of another type than Optuna writes in its
// column is refused, never converted: SQLite's conversions make the text '2e2', which matched
// trial 200 by affinity, read back as the integer 2, so a converted row would describe
// something other than what matched. Errors name the file, the table and the row by its
// first column (each query selects the table's key first).
class Row {
 public:
  Row(Db& db, sqlite3_stmt* s, const char* table) : db_(db), s_(s), table_(table) {}

  std::string Name() const {
    return absl::StrCat(table_, " row ", sqlite3_column_name(s_, 0), " = ", Shown(s_, 0));
  }

  absl::Status Bad(int i, absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(
        db_.path(), ": ", Name(), ": ", sqlite3_column_name(s_, i), " ", Shown(s_, i), " ", why));
  }

  // An INTEGER (a NULL or any other type is an error).
  absl::StatusOr<int64_t> Int(int i) const {
    if (sqlite3_column_type(s_, i) != SQLITE_INTEGER) return Bad(i, "is not an integer");
    return sqlite3_column_int64(s_, i);
  }

  // An INTEGER or a REAL, or nullopt for NULL; a non-finite REAL is refused unless
  // `finite_only` is false.
  absl::StatusOr<std::optional<double>> Real(int i, bool finite_only) const {
    const int type = sqlite3_column_type(s_, i);
    if (type == SQLITE_NULL) return std::nullopt;
    if (type != SQLITE_INTEGER && type != SQLITE_FLOAT) return Bad(i, "is not a number");
    const double v = sqlite3_column_double(s_, i);
    if (finite_only && !std::isfinite(v)) return Bad(i, "is not finite");
    return v;
  }

  // TEXT of at most max_bytes of UTF-8, or "" for NULL.
  absl::StatusOr<std::string> Text(int i, size_t max_bytes) const {
    const int type = sqlite3_column_type(s_, i);
    if (type == SQLITE_NULL) return std::string();
    if (type != SQLITE_TEXT) return Bad(i, "is not text");
    const char* t = reinterpret_cast<const char*>(sqlite3_column_text(s_, i));
    const size_t n = static_cast<size_t>(sqlite3_column_bytes(s_, i));
    if (t == nullptr) return Bad(i, "cannot be read");
    if (n > max_bytes) return Bad(i, absl::StrCat("is longer than ", max_bytes, " bytes"));
    SEXTANT_RETURN_IF_ERROR(db_.Take(n));
    std::string out(t, n);
    if (!IsUtf8(out)) return Bad(i, "is not UTF-8");
    return out;
  }

  // Text holding JSON nested at most kMaxOptunaJsonDepth deep (parsed JSON is copied,
  // compared and printed recursively).
  absl::StatusOr<std::string> JsonText(int i) const {
    SEXTANT_ASSIGN_OR_RETURN(std::string text, Text(i, kMaxOptunaValueBytes));
    if (JsonDepth(text) > kMaxOptunaJsonDepth) {
      return Bad(i, absl::StrCat("nests deeper than ", kMaxOptunaJsonDepth, " levels"));
    }
    return text;
  }

 private:
  Db& db_;
  sqlite3_stmt* s_;
  const char* table_;
};

// Attribute JSON as written by Python's json.dumps, which may hold NaN or Infinity that strict
// JSON has no words for: those values are kept as their text, so nothing stored is dropped.
Json AttrValue(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? Json(text) : j;
}

// A stored value and its value_type column (absent in schemas before v3.0.0.c / v3.0.0.d).
absl::StatusOr<std::optional<double>> TypedValue(const Row& row, int value_col, int type_col) {
  std::string type = "FINITE";
  if (type_col >= 0) {
    SEXTANT_ASSIGN_OR_RETURN(type, row.Text(type_col, kMaxOptunaNameBytes));
  }
  if (type == "INF_POS") return std::numeric_limits<double>::infinity();
  if (type == "INF_NEG") return -std::numeric_limits<double>::infinity();
  if (type == "NAN") return std::numeric_limits<double>::quiet_NaN();
  return row.Real(value_col, /*finite_only=*/false);
}

absl::StatusOr<std::set<std::string>> Columns(Db& db, const std::string& table) {
  std::set<std::string> out;
  SEXTANT_RETURN_IF_ERROR(db.Query(
      absl::StrCat("SELECT name FROM pragma_table_info('", table, "')"), {}, [&](sqlite3_stmt* s) {
        SEXTANT_ASSIGN_OR_RETURN(std::string name,
                                 Row(db, s, "pragma_table_info").Text(0, kMaxOptunaNameBytes));
        out.insert(std::move(name));
        return absl::OkStatus();
      }));
  return out;
}

// The tables whose rows reference a study or a trial by id: (table, its key, the id column,
// the table and column the id names).
struct Reference {
  const char* table;
  const char* key;
  const char* column;
  const char* target;
  const char* target_column;
};
constexpr Reference kReferences[] = {
    {"studies", "study_id", "study_id", nullptr, nullptr},
    {"trials", "trial_id", "trial_id", nullptr, nullptr},
    {"trials", "trial_id", "study_id", "studies", "study_id"},
    {"study_directions", "study_direction_id", "study_id", "studies", "study_id"},
    {"study_user_attributes", "study_user_attribute_id", "study_id", "studies", "study_id"},
    {"study_system_attributes", "study_system_attribute_id", "study_id", "studies", "study_id"},
    {"trial_params", "param_id", "trial_id", "trials", "trial_id"},
    {"trial_values", "trial_value_id", "trial_id", "trials", "trial_id"},
    {"trial_intermediate_values", "trial_intermediate_value_id", "trial_id", "trials", "trial_id"},
    {"trial_user_attributes", "trial_user_attribute_id", "trial_id", "trials", "trial_id"},
    {"trial_system_attributes", "trial_system_attribute_id", "trial_id", "trials", "trial_id"},
    {"trial_heartbeats", "trial_heartbeat_id", "trial_id", "trials", "trial_id"},
};

// Every id in the storage is an INTEGER naming a row that exists, in every study, so that the
// reads below never meet a row whose id matched by SQL affinity but reads as another number.
absl::Status CheckReferences(Db& db, const std::set<std::string>& tables) {
  for (const Reference& r : kReferences) {
    if (!tables.contains(r.table)) continue;  // trial_heartbeats: Optuna >= 2.6 only
    std::string where = absl::StrCat("typeof(", r.column, ") <> 'integer'");
    if (r.target != nullptr) {
      absl::StrAppend(&where, " OR ", r.column, " NOT IN (SELECT ", r.target_column, " FROM ",
                      r.target, ")");
    }
    SEXTANT_RETURN_IF_ERROR(db.Query(absl::StrCat("SELECT ", r.key, ", ", r.column, " FROM ",
                                                  r.table, " WHERE ", where, " LIMIT 1"),
                                     {}, [&](sqlite3_stmt* s) {
                                       Row row(db, s, r.table);
                                       if (sqlite3_column_type(s, 1) != SQLITE_INTEGER) {
                                         return row.Bad(1, "is not an integer id");
                                       }
                                       return row.Bad(1,
                                                      absl::StrCat("names no row of ", r.target));
                                     }));
  }
  return absl::OkStatus();
}

// The file is an SQLite database, not damaged, with Optuna's tables at a schema we read.
absl::Status CheckStorage(Db& db, const std::string& path, OptunaStudy* study) {
  std::string check;
  SEXTANT_RETURN_IF_ERROR(db.Query("PRAGMA quick_check(1)", {}, [&](sqlite3_stmt* s) {
    SEXTANT_ASSIGN_OR_RETURN(check, Row(db, s, "quick_check").Text(0, kMaxOptunaValueBytes));
    return absl::OkStatus();
  }));
  if (check != "ok") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the SQLite database is corrupt (", YamlEscaped(check), ")"));
  }
  std::set<std::string> tables;
  SEXTANT_RETURN_IF_ERROR(
      db.Query("SELECT name FROM sqlite_master WHERE type = 'table'", {}, [&](sqlite3_stmt* s) {
        SEXTANT_ASSIGN_OR_RETURN(std::string name,
                                 Row(db, s, "sqlite_master").Text(0, kMaxOptunaNameBytes));
        tables.insert(std::move(name));
        return absl::OkStatus();
      }));
  std::vector<std::string> missing;
  for (const char* t : kTables) {
    if (!tables.contains(t)) missing.push_back(t);
  }
  if (!missing.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not an Optuna storage (an SQLite database without the table",
                     missing.size() > 1 ? "s " : " ", absl::StrJoin(missing, ", "), ")"));
  }
  SEXTANT_RETURN_IF_ERROR(
      db.Query("SELECT version_num FROM alembic_version", {}, [&](sqlite3_stmt* s) {
        SEXTANT_ASSIGN_OR_RETURN(study->alembic_version,
                                 Row(db, s, "alembic_version").Text(0, kMaxOptunaNameBytes));
        return absl::OkStatus();
      }));
  SEXTANT_RETURN_IF_ERROR(
      db.Query("SELECT version_info_id, schema_version, library_version FROM version_info", {},
               [&](sqlite3_stmt* s) -> absl::Status {
                 Row row(db, s, "version_info");
                 SEXTANT_ASSIGN_OR_RETURN(int64_t version, row.Int(1));
                 study->schema_version = static_cast<int>(std::clamp<int64_t>(version, -1, 1000));
                 SEXTANT_ASSIGN_OR_RETURN(study->library_version, row.Text(2, kMaxOptunaNameBytes));
                 return absl::OkStatus();
               }));
  const std::vector<std::string>& supported = SupportedOptunaSchemas();
  if (std::find(supported.begin(), supported.end(), study->alembic_version) == supported.end() ||
      study->schema_version != 12) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": unsupported Optuna storage schema ",
        study->alembic_version.empty() ? "(no alembic_version)"
                                       : YamlEscaped(study->alembic_version),
        " (version_info.schema_version ", study->schema_version, ", written by Optuna ",
        study->library_version.empty() ? "?" : YamlQuoted(study->library_version), "); supported: ",
        absl::StrJoin(supported, ", "), " with schema_version 12 (Optuna 2.4 to 5.x)",
        study->alembic_version < "v2.4.0.a"
            ? "; upgrade it with `optuna storage upgrade --storage sqlite:///FILE`"
            : ""));
  }
  return CheckReferences(db, tables);
}

absl::Status FindStudy(Db& db, const std::string& path, const std::string& name,
                       OptunaStudy* study) {
  std::vector<std::pair<int64_t, std::string>> studies;
  SEXTANT_RETURN_IF_ERROR(db.Query("SELECT study_id, study_name FROM studies ORDER BY study_id", {},
                                   [&](sqlite3_stmt* s) -> absl::Status {
                                     Row row(db, s, "studies");
                                     SEXTANT_ASSIGN_OR_RETURN(int64_t id, row.Int(0));
                                     SEXTANT_ASSIGN_OR_RETURN(std::string n,
                                                              row.Text(1, kMaxOptunaNameBytes));
                                     studies.emplace_back(id, std::move(n));
                                     return absl::OkStatus();
                                   }));
  std::vector<std::string> names;
  for (const auto& [id, n] : studies) names.push_back(n);
  SEXTANT_ASSIGN_OR_RETURN(const size_t chosen, ChooseStudy(path, name, names));
  study->study_id = studies[chosen].first;
  study->name = studies[chosen].second;
  return absl::OkStatus();
}

absl::Status ReadStudyRows(Db& db, OptunaStudy* study) {
  const int64_t id = study->study_id;
  SEXTANT_RETURN_IF_ERROR(
      db.Query("SELECT study_direction_id, direction FROM study_directions WHERE study_id = ? "
               "ORDER BY objective",
               {id}, [&](sqlite3_stmt* s) -> absl::Status {
                 Row row(db, s, "study_directions");
                 if (study->directions.size() == kMaxOptunaObjectives) {
                   return row.Bad(1, absl::StrCat("is past the ", kMaxOptunaObjectives,
                                                  " objectives a study may have"));
                 }
                 SEXTANT_ASSIGN_OR_RETURN(std::string d, row.Text(1, kMaxOptunaNameBytes));
                 study->directions.push_back(std::move(d));
                 return absl::OkStatus();
               }));
  for (auto [table, key, into] :
       {std::tuple{"study_user_attributes", "study_user_attribute_id", &study->user_attrs},
        std::tuple{"study_system_attributes", "study_system_attribute_id", &study->system_attrs}}) {
    SEXTANT_RETURN_IF_ERROR(
        db.Query(absl::StrCat("SELECT ", key, ", key, value_json FROM ", table,
                              " WHERE study_id = ? ORDER BY key"),
                 {id}, [&, table = table, into = into](sqlite3_stmt* s) -> absl::Status {
                   Row row(db, s, table);
                   SEXTANT_ASSIGN_OR_RETURN(std::string k, row.Text(1, kMaxOptunaNameBytes));
                   SEXTANT_ASSIGN_OR_RETURN(std::string v, row.JsonText(2));
                   (*into)[k] = AttrValue(v);
                   return absl::OkStatus();
                 }));
  }
  std::set<int64_t> seen;
  return db.Query(
      "SELECT trial_id, number, state, datetime_start, datetime_complete FROM trials "
      "WHERE study_id = ? ORDER BY number, trial_id",
      {id}, [&](sqlite3_stmt* s) -> absl::Status {
        Row row(db, s, "trials");
        OptunaTrial t;
        SEXTANT_ASSIGN_OR_RETURN(t.trial_id, row.Int(0));
        SEXTANT_ASSIGN_OR_RETURN(t.number, row.Int(1));
        SEXTANT_ASSIGN_OR_RETURN(t.state, row.Text(2, kMaxOptunaNameBytes));
        SEXTANT_ASSIGN_OR_RETURN(t.datetime_start, row.Text(3, kMaxOptunaNameBytes));
        SEXTANT_ASSIGN_OR_RETURN(t.datetime_complete, row.Text(4, kMaxOptunaNameBytes));
        if (!seen.insert(t.trial_id).second) return row.Bad(0, "appears twice");
        study->trials.push_back(std::move(t));
        return absl::OkStatus();
      });
}

// The trial a row of a per-trial table belongs to: column 1 must be the id of one of the
// study's trials.
absl::StatusOr<OptunaTrial*> TrialOf(const Row& row, const std::map<int64_t, OptunaTrial*>& by_id) {
  SEXTANT_ASSIGN_OR_RETURN(int64_t id, row.Int(1));
  auto it = by_id.find(id);
  if (it == by_id.end()) return row.Bad(1, "is not a trial of the study");
  return it->second;
}

absl::Status ReadParams(Db& db, const std::string& of_study,
                        const std::map<int64_t, OptunaTrial*>& by_id, OptunaStudy* study) {
  return db.Query(
      absl::StrCat("SELECT param_id, trial_id, param_name, param_value, distribution_json "
                   "FROM trial_params WHERE ",
                   of_study, " ORDER BY trial_id, param_id"),
      {study->study_id}, [&](sqlite3_stmt* s) -> absl::Status {
        Row row(db, s, "trial_params");
        SEXTANT_ASSIGN_OR_RETURN(OptunaTrial * t, TrialOf(row, by_id));
        OptunaParam p;
        SEXTANT_ASSIGN_OR_RETURN(p.name, row.Text(2, kMaxOptunaNameBytes));
        SEXTANT_ASSIGN_OR_RETURN(std::optional<double> internal, row.Real(3, true));
        if (!internal) return row.Bad(3, "is not a number");
        p.internal = *internal;
        SEXTANT_ASSIGN_OR_RETURN(std::string json, row.JsonText(4));
        auto d = ParseOptunaDistribution(json);
        if (!d.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat(db.path(), ": study ", YamlQuoted(study->name), ", trial ", t->number,
                           ", parameter ", YamlQuoted(p.name), ": ", d.status().message()));
        }
        p.distribution = *std::move(d);
        if (p.distribution.kind == OptunaDistribution::Kind::kCategorical &&
            (p.internal != std::floor(p.internal) || p.internal < 0 ||
             p.internal >= static_cast<double>(p.distribution.choices.size()))) {
          return absl::InvalidArgumentError(
              absl::StrCat(db.path(), ": trial ", t->number, ", parameter ", YamlQuoted(p.name),
                           ": choice index ", p.internal, " is not one of the ",
                           p.distribution.choices.size(), " choices"));
        }
        t->params.push_back(std::move(p));
        return absl::OkStatus();
      });
}

absl::Status ReadValues(Db& db, const std::string& of_study,
                        const std::map<int64_t, OptunaTrial*>& by_id, OptunaStudy* study) {
  SEXTANT_ASSIGN_OR_RETURN(std::set<std::string> value_cols, Columns(db, "trial_values"));
  const bool typed = value_cols.contains("value_type");
  return db.Query(
      absl::StrCat("SELECT trial_value_id, trial_id, objective, value", typed ? ", value_type" : "",
                   " FROM trial_values WHERE ", of_study, " ORDER BY trial_id, objective"),
      {study->study_id}, [&](sqlite3_stmt* s) -> absl::Status {
        Row row(db, s, "trial_values");
        SEXTANT_ASSIGN_OR_RETURN(OptunaTrial * t, TrialOf(row, by_id));
        SEXTANT_ASSIGN_OR_RETURN(const int64_t objective, row.Int(2));
        // The index sizes t->values: only the study's own objectives are allowed.
        if (objective < 0 || objective >= static_cast<int64_t>(study->directions.size())) {
          return row.Bad(2, absl::StrCat("is not one of the study's ", study->directions.size(),
                                         " objectives"));
        }
        if (t->values.size() <= static_cast<size_t>(objective)) t->values.resize(objective + 1);
        SEXTANT_ASSIGN_OR_RETURN(t->values[objective], TypedValue(row, 3, typed ? 4 : -1));
        return absl::OkStatus();
      });
}

absl::Status ReadIntermediate(Db& db, const std::string& of_study,
                              const std::map<int64_t, OptunaTrial*>& by_id, OptunaStudy* study) {
  SEXTANT_ASSIGN_OR_RETURN(std::set<std::string> step_cols,
                           Columns(db, "trial_intermediate_values"));
  const bool typed = step_cols.contains("intermediate_value_type");
  return db.Query(
      absl::StrCat("SELECT trial_intermediate_value_id, trial_id, step, intermediate_value",
                   typed ? ", intermediate_value_type" : "",
                   " FROM trial_intermediate_values WHERE ", of_study, " ORDER BY trial_id, step"),
      {study->study_id}, [&](sqlite3_stmt* s) -> absl::Status {
        Row row(db, s, "trial_intermediate_values");
        SEXTANT_ASSIGN_OR_RETURN(OptunaTrial * t, TrialOf(row, by_id));
        SEXTANT_ASSIGN_OR_RETURN(const int64_t step, row.Int(2));
        SEXTANT_ASSIGN_OR_RETURN(std::optional<double> v, TypedValue(row, 3, typed ? 4 : -1));
        t->intermediate.emplace_back(step, v.value_or(std::numeric_limits<double>::quiet_NaN()));
        return absl::OkStatus();
      });
}

// Reads the per-trial tables: params, values, intermediate values and attributes.
absl::Status ReadTrialRows(Db& db, OptunaStudy* study) {
  std::map<int64_t, OptunaTrial*> by_id;
  for (OptunaTrial& t : study->trials) by_id[t.trial_id] = &t;
  const std::string of_study = "trial_id IN (SELECT trial_id FROM trials WHERE study_id = ?)";
  SEXTANT_RETURN_IF_ERROR(ReadParams(db, of_study, by_id, study));
  SEXTANT_RETURN_IF_ERROR(ReadValues(db, of_study, by_id, study));
  SEXTANT_RETURN_IF_ERROR(ReadIntermediate(db, of_study, by_id, study));
  for (auto [table, key, user] :
       {std::tuple{"trial_user_attributes", "trial_user_attribute_id", true},
        std::tuple{"trial_system_attributes", "trial_system_attribute_id", false}}) {
    SEXTANT_RETURN_IF_ERROR(db.Query(
        absl::StrCat("SELECT ", key, ", trial_id, key, value_json FROM ", table, " WHERE ",
                     of_study, " ORDER BY trial_id, key"),
        {study->study_id}, [&, table = table, user = user](sqlite3_stmt* s) -> absl::Status {
          Row row(db, s, table);
          SEXTANT_ASSIGN_OR_RETURN(OptunaTrial * t, TrialOf(row, by_id));
          SEXTANT_ASSIGN_OR_RETURN(std::string k, row.Text(2, kMaxOptunaNameBytes));
          SEXTANT_ASSIGN_OR_RETURN(std::string v, row.JsonText(3));
          (user ? t->user_attrs : t->system_attrs)[k] = AttrValue(v);
          return absl::OkStatus();
        }));
  }
  return absl::OkStatus();
}

// Unix seconds of a naive "YYYY-MM-DD HH:MM:SS[.ffffff]" in zone; 0 when empty or unreadable.
double NaiveTime(const std::string& text, absl::TimeZone zone) {
  absl::Time t;
  std::string err;
  if (text.empty() || !absl::ParseTime("%Y-%m-%d %H:%M:%E*S", text, zone, &t, &err)) return 0;
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

// The RDB storage's datetimes are naive: Optuna before 5.0 wrote local time (datetime.now()),
// Optuna 5 writes UTC and reads every row as UTC (optuna/optuna#6776, without migrating older
// rows). Which a storage holds is told by the Optuna that created it.
absl::TimeZone StoredZone(const std::string& library_version) {
  int major = 0;
  for (char c : library_version) {
    if (c < '0' || c > '9' || major > 1000) break;
    major = major * 10 + (c - '0');
  }
  return major >= 5 ? absl::UTCTimeZone() : absl::LocalTimeZone();
}

// attributes[key] as a number, or an error naming the distribution and the key.
absl::StatusOr<double> Attribute(const Json& attributes, const std::string& key,
                                 const std::string& distribution) {
  if (!attributes.contains(key) || !attributes[key].is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat(distribution, ": attribute '", key, "' is missing or not a number"));
  }
  return attributes[key].get<double>();
}

}  // namespace

const std::vector<std::string>& SupportedOptunaSchemas() {
  static const auto* kSupported = new std::vector<std::string>{
      "v2.4.0.a", "v2.6.0.a", "v3.0.0.a", "v3.0.0.b", "v3.0.0.c", "v3.0.0.d", "v3.2.0.a"};
  return *kSupported;
}

// Long because it is one table: each stored name and how its attributes read.
absl::StatusOr<OptunaDistribution> ParseOptunaDistribution(const std::string& json) {
  Json j = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() ||
      !j.contains("attributes") || !j["attributes"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed distribution_json ", json));
  }
  OptunaDistribution d;
  d.name = j["name"].get<std::string>();
  d.stored = j;
  const Json& a = j["attributes"];
  using Kind = OptunaDistribution::Kind;
  if (d.name == "CategoricalDistribution") {
    if (!a.contains("choices") || !a["choices"].is_array() || a["choices"].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(d.name, ": attribute 'choices' is missing or empty"));
    }
    d.kind = Kind::kCategorical;
    d.choices = a["choices"];
    return d;
  }
  static const std::map<std::string, std::pair<Kind, bool>> kNumeric = {
      {"FloatDistribution", {Kind::kFloat, false}},
      {"IntDistribution", {Kind::kInt, false}},
      {"UniformDistribution", {Kind::kFloat, false}},
      {"LogUniformDistribution", {Kind::kFloat, true}},
      {"DiscreteUniformDistribution", {Kind::kFloat, false}},
      {"IntUniformDistribution", {Kind::kInt, false}},
      {"IntLogUniformDistribution", {Kind::kInt, true}}};
  auto it = kNumeric.find(d.name);
  if (it == kNumeric.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported distribution '", d.name,
        "' (supported: FloatDistribution, IntDistribution, CategoricalDistribution and the "
        "legacy UniformDistribution, LogUniformDistribution, DiscreteUniformDistribution, "
        "IntUniformDistribution, IntLogUniformDistribution)"));
  }
  d.kind = it->second.first;
  d.log = it->second.second;
  SEXTANT_ASSIGN_OR_RETURN(d.low, Attribute(a, "low", d.name));
  SEXTANT_ASSIGN_OR_RETURN(d.high, Attribute(a, "high", d.name));
  if (a.contains("log") && a["log"].is_boolean()) d.log = a["log"].get<bool>();
  const char* step_key = d.name == "DiscreteUniformDistribution" ? "q" : "step";
  if (a.contains(step_key) && a[step_key].is_number()) {
    d.step = a[step_key].get<double>();
  } else if (d.name == "DiscreteUniformDistribution") {
    return absl::InvalidArgumentError(
        absl::StrCat(d.name, ": attribute 'q' is missing or not a number"));
  } else if (d.kind == Kind::kInt) {
    d.step = 1;
  }
  // Integers past 2^53 have no exact double, and the experiment loader refuses them.
  const double limit =
      d.kind == Kind::kInt ? 9007199254740992.0 : std::numeric_limits<double>::max();
  const auto in_range = [&](double v) { return std::isfinite(v) && std::fabs(v) <= limit; };
  if (!(d.low <= d.high) || !in_range(d.low) || !in_range(d.high) || (d.log && !(d.low > 0)) ||
      (d.step && !(*d.step > 0 && in_range(*d.step)))) {
    return absl::InvalidArgumentError(absl::StrCat(d.name, ": invalid attributes ", a.dump()));
  }
  return d;
}

absl::StatusOr<OptunaStudy> ReadOptunaStudy(const std::string& path, const std::string& name) {
  OptunaStudy study;
  study.storage = path;
  study.format = "SQLite";
  Db db(path);
  SEXTANT_RETURN_IF_ERROR(db.Open());
  SEXTANT_RETURN_IF_ERROR(CheckStorage(db, path, &study));
  SEXTANT_RETURN_IF_ERROR(FindStudy(db, path, name, &study));
  SEXTANT_RETURN_IF_ERROR(ReadStudyRows(db, &study));
  SEXTANT_RETURN_IF_ERROR(ReadTrialRows(db, &study));
  const absl::TimeZone zone = StoredZone(study.library_version);
  for (OptunaTrial& t : study.trials) {
    t.started_at = NaiveTime(t.datetime_start, zone);
    t.completed_at = NaiveTime(t.datetime_complete, zone);
  }
  return study;
}

absl::StatusOr<OptunaStudy> ReadOptunaStorage(const std::string& path, const std::string& study) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open"));
  char head[16] = {};
  f.read(head, sizeof(head));
  const std::string start(head, static_cast<size_t>(f.gcount()));
  f.close();
  constexpr absl::string_view kSqliteMagic("SQLite format 3\0", 16);
  if (start == kSqliteMagic) return ReadOptunaStudy(path, study);
  if (start.empty() || start[0] == '{') return ReadOptunaJournal(path, study);
  return absl::InvalidArgumentError(
      absl::StrCat(path,
                   ": not an Optuna storage: neither an SQLite database nor an Optuna "
                   "journal file (JSON lines)"));
}

}  // namespace sextant
