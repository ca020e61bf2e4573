#include "orchestrator/import/optuna_storage.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

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
class Db {
 public:
  explicit Db(std::string path) : path_(std::move(path)) {}
  ~Db() { sqlite3_close(db_); }

  absl::Status Open() {
    if (sqlite3_open_v2(path_.c_str(), &db_, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": cannot open: ", db_ ? sqlite3_errmsg(db_) : "out of memory"));
    }
    return absl::OkStatus();
  }

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
      status = row(s);
      if (!status.ok()) break;
    }
    if (status.ok() && rc != SQLITE_DONE) status = Error();
    sqlite3_finalize(s);
    return status;
  }

  absl::Status Error() const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": not a readable SQLite database (", sqlite3_errmsg(db_), ")"));
  }

 private:
  std::string path_;
  sqlite3* db_ = nullptr;
};

std::string Text(sqlite3_stmt* s, int i) {
  const unsigned char* t = sqlite3_column_text(s, i);
  return t ? reinterpret_cast<const char*>(t) : "";
}

bool IsNull(sqlite3_stmt* s, int i) { return sqlite3_column_type(s, i) == SQLITE_NULL; }

// Attribute JSON as written by Python's json.dumps, which may hold NaN or Infinity that strict
// JSON has no words for: those values are kept as their text, so nothing stored is dropped.
Json AttrValue(const std::string& text) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? Json(text) : j;
}

// A stored value and its value_type column (absent in schemas before v3.0.0.c / v3.0.0.d).
std::optional<double> TypedValue(sqlite3_stmt* s, int value_col, int type_col) {
  const std::string type = type_col >= 0 ? Text(s, type_col) : "FINITE";
  if (type == "INF_POS") return std::numeric_limits<double>::infinity();
  if (type == "INF_NEG") return -std::numeric_limits<double>::infinity();
  if (type == "NAN") return std::numeric_limits<double>::quiet_NaN();
  if (IsNull(s, value_col)) return std::nullopt;
  return sqlite3_column_double(s, value_col);
}

absl::StatusOr<std::set<std::string>> Columns(Db& db, const std::string& table) {
  std::set<std::string> out;
  SEXTANT_RETURN_IF_ERROR(db.Query(
      absl::StrCat("SELECT name FROM pragma_table_info('", table, "')"), {}, [&](sqlite3_stmt* s) {
        out.insert(Text(s, 0));
        return absl::OkStatus();
      }));
  return out;
}

// The file is an SQLite database, not damaged, with Optuna's tables at a schema we read.
absl::Status CheckStorage(Db& db, const std::string& path, OptunaStudy* study) {
  std::string check;
  SEXTANT_RETURN_IF_ERROR(db.Query("PRAGMA quick_check(1)", {}, [&](sqlite3_stmt* s) {
    check = Text(s, 0);
    return absl::OkStatus();
  }));
  if (check != "ok") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the SQLite database is corrupt (", check, ")"));
  }
  std::set<std::string> tables;
  SEXTANT_RETURN_IF_ERROR(
      db.Query("SELECT name FROM sqlite_master WHERE type = 'table'", {}, [&](sqlite3_stmt* s) {
        tables.insert(Text(s, 0));
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
        study->alembic_version = Text(s, 0);
        return absl::OkStatus();
      }));
  SEXTANT_RETURN_IF_ERROR(db.Query("SELECT schema_version, library_version FROM version_info", {},
                                   [&](sqlite3_stmt* s) {
                                     study->schema_version = sqlite3_column_int(s, 0);
                                     study->library_version = Text(s, 1);
                                     return absl::OkStatus();
                                   }));
  const std::vector<std::string>& supported = SupportedOptunaSchemas();
  if (std::find(supported.begin(), supported.end(), study->alembic_version) == supported.end() ||
      study->schema_version != 12) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": unsupported Optuna storage schema ",
        study->alembic_version.empty() ? "(no alembic_version)" : study->alembic_version,
        " (version_info.schema_version ", study->schema_version, ", written by Optuna ",
        study->library_version.empty() ? "?" : study->library_version, "); supported: ",
        absl::StrJoin(supported, ", "), " with schema_version 12 (Optuna 2.4 to 3.x)",
        study->alembic_version < "v2.4.0.a"
            ? "; upgrade it with `optuna storage upgrade --storage sqlite:///FILE`"
            : ""));
  }
  return absl::OkStatus();
}

absl::Status FindStudy(Db& db, const std::string& path, const std::string& name,
                       OptunaStudy* study) {
  std::vector<std::string> names;
  SEXTANT_RETURN_IF_ERROR(db.Query("SELECT study_id, study_name FROM studies ORDER BY study_id", {},
                                   [&](sqlite3_stmt* s) {
                                     names.push_back(Text(s, 1));
                                     if (names.back() == name)
                                       study->study_id = sqlite3_column_int64(s, 0);
                                     return absl::OkStatus();
                                   }));
  if (study->study_id != 0) {
    study->name = name;
    return absl::OkStatus();
  }
  if (name.empty() && names.size() == 1) return FindStudy(db, path, names[0], study);
  std::vector<std::string> quoted;
  for (const std::string& n : names) quoted.push_back(Json(n).dump());
  if (names.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": holds no study"));
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": holds ", names.size(),
                     " studies; name one with --study: ", absl::StrJoin(quoted, ", ")));
  }
  return absl::InvalidArgumentError(absl::StrCat(path, ": no study named ", Json(name).dump(),
                                                 "; its studies: ", absl::StrJoin(quoted, ", ")));
}

absl::Status ReadStudyRows(Db& db, OptunaStudy* study) {
  const int64_t id = study->study_id;
  SEXTANT_RETURN_IF_ERROR(
      db.Query("SELECT direction FROM study_directions WHERE study_id = ? ORDER BY objective", {id},
               [&](sqlite3_stmt* s) {
                 study->directions.push_back(Text(s, 0));
                 return absl::OkStatus();
               }));
  for (auto [table, into] : {std::pair{"study_user_attributes", &study->user_attrs},
                             std::pair{"study_system_attributes", &study->system_attrs}}) {
    SEXTANT_RETURN_IF_ERROR(db.Query(
        absl::StrCat("SELECT key, value_json FROM ", table, " WHERE study_id = ? ORDER BY key"),
        {id}, [&](sqlite3_stmt* s) {
          (*into)[Text(s, 0)] = AttrValue(Text(s, 1));
          return absl::OkStatus();
        }));
  }
  return db.Query(
      "SELECT trial_id, number, state, datetime_start, datetime_complete FROM trials "
      "WHERE study_id = ? ORDER BY number, trial_id",
      {id}, [&](sqlite3_stmt* s) {
        OptunaTrial t;
        t.trial_id = sqlite3_column_int64(s, 0);
        t.number = sqlite3_column_int64(s, 1);
        t.state = Text(s, 2);
        t.datetime_start = Text(s, 3);
        t.datetime_complete = Text(s, 4);
        study->trials.push_back(std::move(t));
        return absl::OkStatus();
      });
}

// Reads the per-trial tables: params, values, intermediate values and attributes.
absl::Status ReadTrialRows(Db& db, const std::string& path, OptunaStudy* study) {
  std::map<int64_t, OptunaTrial*> by_id;
  for (OptunaTrial& t : study->trials) by_id[t.trial_id] = &t;
  const std::string of_study = "trial_id IN (SELECT trial_id FROM trials WHERE study_id = ?)";
  const int64_t id = study->study_id;
  SEXTANT_RETURN_IF_ERROR(db.Query(
      absl::StrCat("SELECT trial_id, param_name, param_value, distribution_json FROM trial_params "
                   "WHERE ",
                   of_study, " ORDER BY trial_id, param_id"),
      {id}, [&](sqlite3_stmt* s) -> absl::Status {
        OptunaTrial* t = by_id[sqlite3_column_int64(s, 0)];
        OptunaParam p;
        p.name = Text(s, 1);
        p.internal = sqlite3_column_double(s, 2);
        auto d = ParseOptunaDistribution(Text(s, 3));
        if (!d.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": study ", Json(study->name).dump(), ", trial ", t->number,
                           ", parameter ", Json(p.name).dump(), ": ", d.status().message()));
        }
        p.distribution = *std::move(d);
        if (p.distribution.kind == OptunaDistribution::Kind::kCategorical &&
            (p.internal != std::floor(p.internal) || p.internal < 0 ||
             p.internal >= static_cast<double>(p.distribution.choices.size()))) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": trial ", t->number, ", parameter ", Json(p.name).dump(), ": choice index ",
              p.internal, " is not one of the ", p.distribution.choices.size(), " choices"));
        }
        t->params.push_back(std::move(p));
        return absl::OkStatus();
      }));
  SEXTANT_ASSIGN_OR_RETURN(std::set<std::string> value_cols, Columns(db, "trial_values"));
  SEXTANT_RETURN_IF_ERROR(db.Query(
      absl::StrCat("SELECT trial_id, objective, value",
                   value_cols.contains("value_type") ? ", value_type" : "",
                   " FROM trial_values WHERE ", of_study, " ORDER BY trial_id, objective"),
      {id}, [&](sqlite3_stmt* s) {
        OptunaTrial* t = by_id[sqlite3_column_int64(s, 0)];
        const int64_t objective = sqlite3_column_int64(s, 1);
        if (objective < 0 || objective > 1000) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": trial ", t->number, ": objective index ", objective));
        }
        if (t->values.size() <= static_cast<size_t>(objective)) t->values.resize(objective + 1);
        t->values[objective] = TypedValue(s, 2, value_cols.contains("value_type") ? 3 : -1);
        return absl::OkStatus();
      }));
  SEXTANT_ASSIGN_OR_RETURN(std::set<std::string> step_cols,
                           Columns(db, "trial_intermediate_values"));
  const bool typed = step_cols.contains("intermediate_value_type");
  SEXTANT_RETURN_IF_ERROR(db.Query(
      absl::StrCat("SELECT trial_id, step, intermediate_value",
                   typed ? ", intermediate_value_type" : "",
                   " FROM trial_intermediate_values WHERE ", of_study, " ORDER BY trial_id, step"),
      {id}, [&](sqlite3_stmt* s) {
        std::optional<double> v = TypedValue(s, 2, typed ? 3 : -1);
        by_id[sqlite3_column_int64(s, 0)]->intermediate.emplace_back(
            sqlite3_column_int64(s, 1), v.value_or(std::numeric_limits<double>::quiet_NaN()));
        return absl::OkStatus();
      }));
  for (auto [table, user] :
       {std::pair{"trial_user_attributes", true}, std::pair{"trial_system_attributes", false}}) {
    SEXTANT_RETURN_IF_ERROR(db.Query(absl::StrCat("SELECT trial_id, key, value_json FROM ", table,
                                                  " WHERE ", of_study, " ORDER BY trial_id, key"),
                                     {id}, [&](sqlite3_stmt* s) {
                                       OptunaTrial* t = by_id[sqlite3_column_int64(s, 0)];
                                       (user ? t->user_attrs : t->system_attrs)[Text(s, 1)] =
                                           AttrValue(Text(s, 2));
                                       return absl::OkStatus();
                                     }));
  }
  return absl::OkStatus();
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
  static const auto* kSupported = new std::vector<std::string>{"v2.4.0.a", "v2.6.0.a", "v3.0.0.a",
                                                               "v3.0.0.b", "v3.0.0.c", "v3.0.0.d"};
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
  if (!(d.low <= d.high) || (d.log && !(d.low > 0)) || (d.step && !(*d.step > 0))) {
    return absl::InvalidArgumentError(absl::StrCat(d.name, ": invalid attributes ", a.dump()));
  }
  return d;
}

absl::StatusOr<OptunaStudy> ReadOptunaStudy(const std::string& path, const std::string& name) {
  OptunaStudy study;
  study.storage = path;
  Db db(path);
  SEXTANT_RETURN_IF_ERROR(db.Open());
  SEXTANT_RETURN_IF_ERROR(CheckStorage(db, path, &study));
  SEXTANT_RETURN_IF_ERROR(FindStudy(db, path, name, &study));
  SEXTANT_RETURN_IF_ERROR(ReadStudyRows(db, &study));
  SEXTANT_RETURN_IF_ERROR(ReadTrialRows(db, path, &study));
  return study;
}

}  // namespace sextant
