#include "orchestrator/import/optuna_journal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "orchestrator/import/internal/python_json.h"
#include "orchestrator/import/internal/study_choice.h"

namespace sextant {
namespace {

using Json = nlohmann::json;
using OJson = nlohmann::ordered_json;
using Kind = OptunaDistribution::Kind;

// optuna/storages/journal/_storage.py, JournalOperation.
enum Op : int64_t {
  kCreateStudy = 0,
  kDeleteStudy = 1,
  kSetStudyUserAttr = 2,
  kSetStudySystemAttr = 3,
  kCreateTrial = 4,
  kSetTrialParam = 5,
  kSetTrialStateValues = 6,
  kSetTrialIntermediateValue = 7,
  kSetTrialUserAttr = 8,
  kSetTrialSystemAttr = 9,
  kDiscardTrials = 10,  // written only by other implementations; Optuna ignores it
};

// TrialState and StudyDirection by their integer values.
constexpr const char* kStates[] = {"RUNNING", "COMPLETE", "PRUNED", "FAIL", "WAITING"};
constexpr const char* kDirections[] = {"NOT_SET", "MINIMIZE", "MAXIMIZE"};

absl::Status Bad(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("'", key, "' ", why));
}

absl::StatusOr<const OJson*> Field(const OJson& op, const char* key) {
  auto it = op.find(key);
  if (it == op.end()) return Bad(key, "is missing");
  return &*it;
}

absl::StatusOr<int64_t> IntField(const OJson& op, const char* key) {
  SEXTANT_ASSIGN_OR_RETURN(const OJson* v, Field(op, key));
  if (v->is_number_integer() && !v->is_number_unsigned()) return v->get<int64_t>();
  if (v->is_number_unsigned() &&
      v->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(v->get<uint64_t>());
  }
  return Bad(key, absl::StrCat("is not an integer: ", v->dump().substr(0, 40)));
}

absl::StatusOr<std::string> NameOf(const OJson& v, absl::string_view what) {
  if (!v.is_string()) return Bad(what, "is not a string");
  std::string s = v.get<std::string>();
  if (s.size() > kMaxOptunaNameBytes) {
    return Bad(what, absl::StrCat("is longer than ", kMaxOptunaNameBytes, " bytes"));
  }
  return s;
}

// A number, or nullopt for null. NaN is kept: the caller decides what it means.
absl::StatusOr<std::optional<double>> NumberOf(const OJson& v, absl::string_view what) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) return Bad(what, absl::StrCat("is not a number: ", v.dump().substr(0, 40)));
  return v.get<double>();
}

// An attribute's value as ReadOptunaStudy keeps it: the JSON, or its text when it holds NaN
// or an Infinity (the SQLite storage keeps such a value as text that strict JSON cannot read).
Json AttrValue(const OJson& v) { return HoldsNonFinite(v) ? Json(DumpPythonJson(v)) : Json(v); }

// A {key: value} field of exactly one entry, as Optuna writes attributes.
absl::StatusOr<std::pair<std::string, Json>> OneAttr(const OJson& op, const char* key) {
  SEXTANT_ASSIGN_OR_RETURN(const OJson* v, Field(op, key));
  if (!v->is_object() || v->size() != 1) return Bad(key, "is not an object of one key");
  SEXTANT_ASSIGN_OR_RETURN(std::string k, NameOf(OJson(v->begin().key()), key));
  return std::pair{std::move(k), AttrValue(v->begin().value())};
}

// Python's datetime.isoformat(): with an offset (Optuna 5 writes UTC, +00:00) or naive, which
// Optuna before 5 wrote in local time.
absl::StatusOr<double> IsoTime(const std::string& text, absl::string_view what) {
  absl::Time t;
  std::string err;
  const bool offset = text.size() > 6 &&
                      (text[text.size() - 6] == '+' || text[text.size() - 6] == '-') &&
                      text[text.size() - 3] == ':';
  const bool ok =
      offset ? absl::ParseTime("%Y-%m-%dT%H:%M:%E*S%Ez", text, &t, &err)
             : absl::ParseTime("%Y-%m-%dT%H:%M:%E*S", text, absl::LocalTimeZone(), &t, &err);
  if (!ok) return Bad(what, absl::StrCat("is not an ISO 8601 time: ", text.substr(0, 40)));
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

// A datetime field: text and seconds, or ("", 0) for null.
absl::Status TimeField(const OJson& op, const char* key, std::string* text, double* seconds) {
  SEXTANT_ASSIGN_OR_RETURN(const OJson* v, Field(op, key));
  if (v->is_null()) {
    text->clear();
    *seconds = 0;
    return absl::OkStatus();
  }
  SEXTANT_ASSIGN_OR_RETURN(*text, NameOf(*v, key));
  SEXTANT_ASSIGN_OR_RETURN(*seconds, IsoTime(*text, key));
  return absl::OkStatus();
}

absl::StatusOr<OptunaDistribution> DistributionOf(const OJson& v, absl::string_view what) {
  if (!v.is_string()) return Bad(what, "is not a distribution's JSON text");
  const std::string text = v.get<std::string>();
  if (JsonDepth(text) > kMaxOptunaJsonDepth) {
    return Bad(what, absl::StrCat("nests deeper than ", kMaxOptunaJsonDepth, " levels"));
  }
  return ParseOptunaDistribution(text);
}

// The internal value of a parameter, checked against its distribution as ReadOptunaStudy does.
absl::StatusOr<OptunaParam> ParamOf(std::string name, const OJson& value,
                                    OptunaDistribution distribution) {
  SEXTANT_ASSIGN_OR_RETURN(std::optional<double> v, NumberOf(value, name));
  if (!v || !std::isfinite(*v)) return Bad(name, "has a value that is not a finite number");
  if (distribution.kind == Kind::kCategorical &&
      (*v != std::floor(*v) || *v < 0 || *v >= static_cast<double>(distribution.choices.size()))) {
    return Bad(name, absl::StrCat("has choice index ", *v, ", not one of the ",
                                  distribution.choices.size(), " choices"));
  }
  return OptunaParam{std::move(name), *v, std::move(distribution)};
}

// optuna.distributions.check_distribution_compatibility: the same kind (legacy names folded),
// the same log for numbers, the same choices for a categorical.
bool Compatible(const OptunaDistribution& a, const OptunaDistribution& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == Kind::kCategorical) return a.choices == b.choices;
  return a.log == b.log;
}

bool Finished(const OptunaTrial& t) {
  return t.state == "COMPLETE" || t.state == "PRUNED" || t.state == "FAIL";
}

// (step, value) in step order, the step's earlier value replaced.
void SetIntermediate(OptunaTrial& t, int64_t step, double v) {
  auto it = std::lower_bound(t.intermediate.begin(), t.intermediate.end(), step,
                             [](const auto& e, int64_t s) { return e.first < s; });
  if (it != t.intermediate.end() && it->first == step) {
    it->second = v;
  } else {
    t.intermediate.insert(it, {step, v});
  }
}

absl::StatusOr<std::vector<std::optional<double>>> ValuesOf(const OJson& v, size_t objectives) {
  std::vector<std::optional<double>> out;
  if (!v.is_array()) return Bad("values", "is not a list");
  if (v.size() > objectives) {
    return Bad("values", absl::StrCat("holds ", v.size(), " values; the study has ", objectives,
                                      " objective", objectives == 1 ? "" : "s"));
  }
  for (const OJson& x : v) {
    SEXTANT_ASSIGN_OR_RETURN(std::optional<double> d, NumberOf(x, "values"));
    out.push_back(d && std::isnan(*d) ? std::nullopt : d);  // as SQLite, which cannot store NaN
  }
  return out;
}

// The replayed storage: JournalStorageReplayResult, as read by a process that wrote none of
// it (so that what Optuna raises for its own worker, it ignores here, as for any other).
class Replay {
 public:
  explicit Replay(std::string path) : path_(std::move(path)) {}

  // Applies one operation. Returns whether it changed anything (an ignored one did not).
  absl::StatusOr<bool> Apply(const OJson& op) {
    if (!op.is_object()) return absl::InvalidArgumentError("not a JSON object");
    SEXTANT_ASSIGN_OR_RETURN(const int64_t code, IntField(op, "op_code"));
    switch (code) {
      case kCreateStudy:
        return CreateStudy(op);
      case kDeleteStudy:
        return DeleteStudy(op);
      case kSetStudyUserAttr:
      case kSetStudySystemAttr:
        return SetStudyAttr(op, code == kSetStudyUserAttr);
      case kCreateTrial:
        return CreateTrial(op);
      case kSetTrialParam:
        return SetParam(op);
      case kSetTrialStateValues:
        return SetStateValues(op);
      case kSetTrialIntermediateValue:
        return SetIntermediateValue(op);
      case kSetTrialUserAttr:
      case kSetTrialSystemAttr:
        return SetTrialAttr(op, code == kSetTrialUserAttr);
      case kDiscardTrials:
        return false;
      default:
        return Bad("op_code", absl::StrCat(code, " is not an operation Optuna writes (0 to 10)"));
    }
  }

  absl::StatusOr<OptunaStudy> Take(const std::string& name) {
    std::vector<std::string> names;
    std::vector<int64_t> ids;
    for (const auto& [id, s] : studies_) {
      names.push_back(s.study.name);
      ids.push_back(id);
    }
    SEXTANT_ASSIGN_OR_RETURN(const size_t chosen, ChooseStudy(path_, name, names));
    return std::move(studies_.at(ids[chosen]).study);
  }

 private:
  struct Study {
    OptunaStudy study;
    std::map<std::string, size_t> first_with;  // parameter -> the first trial that has it
  };
  struct TrialRef {
    int64_t study_id;
    size_t index;
  };

  Study* FindStudy(int64_t id) {
    auto it = studies_.find(id);
    return it == studies_.end() ? nullptr : &it->second;
  }

  // The trial, when it exists (in a study not deleted) and has not finished.
  std::pair<Study*, OptunaTrial*> Updatable(int64_t trial_id) {
    if (trial_id < 0 || trial_id >= static_cast<int64_t>(trials_.size())) return {};
    const TrialRef& ref = trials_[static_cast<size_t>(trial_id)];
    Study* s = FindStudy(ref.study_id);
    if (s == nullptr || Finished(s->study.trials[ref.index])) return {};
    return {s, &s->study.trials[ref.index]};
  }

  absl::StatusOr<bool> CreateStudy(const OJson& op) {
    SEXTANT_ASSIGN_OR_RETURN(const OJson* name, Field(op, "study_name"));
    SEXTANT_ASSIGN_OR_RETURN(std::string study_name, NameOf(*name, "study_name"));
    SEXTANT_ASSIGN_OR_RETURN(const OJson* dirs, Field(op, "directions"));
    if (!dirs->is_array() || dirs->size() > kMaxOptunaObjectives) {
      return Bad("directions",
                 absl::StrCat("is not a list of at most ", kMaxOptunaObjectives, " directions"));
    }
    OptunaStudy s;
    for (const OJson& d : *dirs) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > 2) {
        return Bad("directions",
                   absl::StrCat("holds ", d.dump().substr(0, 40), ", not a direction (0, 1 or 2)"));
      }
      s.directions.push_back(kDirections[d.get<int64_t>()]);
    }
    if (names_.contains(study_name)) return false;
    s.storage = path_;
    s.format = "journal";
    s.study_id = next_study_id_++;
    s.name = study_name;
    names_.insert(std::move(study_name));
    const int64_t id = s.study_id;
    studies_[id].study = std::move(s);
    return true;
  }

  absl::StatusOr<bool> DeleteStudy(const OJson& op) {
    SEXTANT_ASSIGN_OR_RETURN(const int64_t id, IntField(op, "study_id"));
    Study* s = FindStudy(id);
    if (s == nullptr) return false;
    names_.erase(s->study.name);
    studies_.erase(id);
    return true;
  }

  absl::StatusOr<bool> SetStudyAttr(const OJson& op, bool user) {
    SEXTANT_ASSIGN_OR_RETURN(const int64_t id, IntField(op, "study_id"));
    SEXTANT_ASSIGN_OR_RETURN(auto attr, OneAttr(op, user ? "user_attr" : "system_attr"));
    Study* s = FindStudy(id);
    if (s == nullptr) return false;
    (user ? s->study.user_attrs : s->study.system_attrs)[attr.first] = std::move(attr.second);
    return true;
  }

  // Records that trial `index` of s has parameter `name`, for Compatible's comparison.
  static void NoteParam(Study& s, const std::string& name, size_t index) {
    auto [it, added] = s.first_with.emplace(name, index);
    if (!added) it->second = std::min(it->second, index);
  }

  // A trial made from a template (enqueue_trial, add_trial, copy_study) carries everything;
  // one created by ask carries its study and start only.
  absl::StatusOr<bool> CreateTrial(const OJson& op) {
    SEXTANT_ASSIGN_OR_RETURN(const int64_t id, IntField(op, "study_id"));
    Study* s = FindStudy(id);
    if (s == nullptr) return false;
    OptunaTrial t;
    t.state = "RUNNING";
    if (op.contains("state")) {
      SEXTANT_ASSIGN_OR_RETURN(const int64_t state, IntField(op, "state"));
      if (state < 0 || state > 4) return Bad("state", absl::StrCat(state, " is not a state (0-4)"));
      t.state = kStates[state];
    }
    SEXTANT_RETURN_IF_ERROR(TimeField(op, "datetime_start", &t.datetime_start, &t.started_at));
    if (op.contains("datetime_complete")) {
      SEXTANT_RETURN_IF_ERROR(
          TimeField(op, "datetime_complete", &t.datetime_complete, &t.completed_at));
    }
    SEXTANT_RETURN_IF_ERROR(TemplateParams(op, t));
    SEXTANT_RETURN_IF_ERROR(TemplateValues(op, s->study.directions.size(), t));
    for (const char* key : {"user_attrs", "system_attrs"}) {
      if (!op.contains(key)) continue;
      const OJson& attrs = op[key];
      if (!attrs.is_object()) return Bad(key, "is not an object");
      Json& into = key[0] == 'u' ? t.user_attrs : t.system_attrs;
      for (const auto& [k, v] : attrs.items()) {
        SEXTANT_ASSIGN_OR_RETURN(std::string name, NameOf(OJson(k), key));
        into[name] = AttrValue(v);
      }
    }
    if (op.contains("intermediate_values")) {
      const OJson& steps = op["intermediate_values"];
      if (!steps.is_object()) return Bad("intermediate_values", "is not an object");
      for (const auto& [k, v] : steps.items()) {
        int64_t step = 0;
        if (!absl::SimpleAtoi(k, &step))
          return Bad("intermediate_values", "has a step not an integer");
        SEXTANT_ASSIGN_OR_RETURN(std::optional<double> d, NumberOf(v, "intermediate_values"));
        SetIntermediate(t, step, d.value_or(std::numeric_limits<double>::quiet_NaN()));
      }
    }
    t.trial_id = static_cast<int64_t>(trials_.size());
    t.number = static_cast<int64_t>(s->study.trials.size());
    const size_t index = s->study.trials.size();
    for (const OptunaParam& p : t.params) NoteParam(*s, p.name, index);
    s->study.trials.push_back(std::move(t));
    trials_.push_back({id, index});
    return true;
  }

  static absl::Status TemplateParams(const OJson& op, OptunaTrial& t) {
    if (!op.contains("params")) return absl::OkStatus();
    SEXTANT_ASSIGN_OR_RETURN(const OJson* params, Field(op, "params"));
    SEXTANT_ASSIGN_OR_RETURN(const OJson* dists, Field(op, "distributions"));
    if (!params->is_object() || !dists->is_object()) {
      return Bad("params", "or 'distributions' is not an object");
    }
    for (const auto& [name, value] : params->items()) {
      auto d = dists->find(name);
      if (d == dists->end()) return Bad(name, "has a value but no distribution");
      SEXTANT_ASSIGN_OR_RETURN(std::string n, NameOf(OJson(name), "params"));
      auto dist = DistributionOf(*d, name);
      if (!dist.ok()) return Bad(name, dist.status().message());
      SEXTANT_ASSIGN_OR_RETURN(OptunaParam p, ParamOf(std::move(n), value, *std::move(dist)));
      t.params.push_back(std::move(p));
    }
    return absl::OkStatus();
  }

  // FrozenTrial(value=..., values=...): one of them, value meaning [value].
  static absl::Status TemplateValues(const OJson& op, size_t objectives, OptunaTrial& t) {
    const bool has_value = op.contains("value") && !op["value"].is_null();
    const bool has_values = op.contains("values") && !op["values"].is_null();
    if (has_value && has_values) return Bad("value", "and 'values' are both set");
    if (has_values) {
      SEXTANT_ASSIGN_OR_RETURN(t.values, ValuesOf(op["values"], objectives));
    } else if (has_value) {
      SEXTANT_ASSIGN_OR_RETURN(t.values, ValuesOf(OJson::array({op["value"]}), objectives));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> SetParam(const OJson& op) {
    SEXTANT_ASSIGN_OR_RETURN(const int64_t id, IntField(op, "trial_id"));
    auto [s, t] = Updatable(id);
    if (t == nullptr) return false;
    SEXTANT_ASSIGN_OR_RETURN(const OJson* name_field, Field(op, "param_name"));
    SEXTANT_ASSIGN_OR_RETURN(std::string name, NameOf(*name_field, "param_name"));
    SEXTANT_ASSIGN_OR_RETURN(const OJson* dist_field, Field(op, "distribution"));
    auto dist = DistributionOf(*dist_field, "distribution");
    if (!dist.ok()) return Bad(name, dist.status().message());
    SEXTANT_ASSIGN_OR_RETURN(const OJson* value, Field(op, "param_value_internal"));
    SEXTANT_ASSIGN_OR_RETURN(OptunaParam p, ParamOf(name, *value, *std::move(dist)));
    if (auto first = s->first_with.find(name); first != s->first_with.end()) {
      for (const OptunaParam& q : s->study.trials[first->second].params) {
        if (q.name == name && !Compatible(q.distribution, p.distribution)) return false;
      }
    }
    auto same = std::find_if(t->params.begin(), t->params.end(),
                             [&](const OptunaParam& q) { return q.name == name; });
    if (same != t->params.end()) {
      *same = std::move(p);
    } else {
      t->params.push_back(std::move(p));
    }
    NoteParam(*s, name, static_cast<size_t>(t->number));
    return true;
  }

  absl::StatusOr<bool> SetStateValues(const OJson& op) {
    SEXTANT_ASSIGN_OR_RETURN(const int64_t id, IntField(op, "trial_id"));
    auto [s, t] = Updatable(id);
    if (t == nullptr) return false;
    SEXTANT_ASSIGN_OR_RETURN(const int64_t state, IntField(op, "state"));
    if (state < 0 || state > 4) return Bad("state", absl::StrCat(state, " is not a state (0-4)"));
    const std::string name = kStates[state];
    if (name == "RUNNING" && t->state == "RUNNING") return false;  // another worker has it
    SEXTANT_ASSIGN_OR_RETURN(const OJson* values, Field(op, "values"));
    OptunaTrial next = *t;
    if (name == "RUNNING") {
      SEXTANT_RETURN_IF_ERROR(
          TimeField(op, "datetime_start", &next.datetime_start, &next.started_at));
    }
    next.state = name;
    if (Finished(next)) {
      SEXTANT_RETURN_IF_ERROR(
          TimeField(op, "datetime_complete", &next.datetime_complete, &next.completed_at));
    }
    if (!values->is_null()) {
      SEXTANT_ASSIGN_OR_RETURN(next.values, ValuesOf(*values, s->study.directions.size()));
    }
    *t = std::move(next);
    return true;
  }

  absl::StatusOr<bool> SetIntermediateValue(const OJson& op) {
    SEXTANT_ASSIGN_OR_RETURN(const int64_t id, IntField(op, "trial_id"));
    auto [s, t] = Updatable(id);
    if (t == nullptr) return false;
    SEXTANT_ASSIGN_OR_RETURN(const int64_t step, IntField(op, "step"));
    SEXTANT_ASSIGN_OR_RETURN(const OJson* v, Field(op, "intermediate_value"));
    SEXTANT_ASSIGN_OR_RETURN(std::optional<double> d, NumberOf(*v, "intermediate_value"));
    SetIntermediate(*t, step, d.value_or(std::numeric_limits<double>::quiet_NaN()));
    return true;
  }

  absl::StatusOr<bool> SetTrialAttr(const OJson& op, bool user) {
    SEXTANT_ASSIGN_OR_RETURN(const int64_t id, IntField(op, "trial_id"));
    SEXTANT_ASSIGN_OR_RETURN(auto attr, OneAttr(op, user ? "user_attr" : "system_attr"));
    auto [s, t] = Updatable(id);
    if (t == nullptr) return false;
    (user ? t->user_attrs : t->system_attrs)[attr.first] = std::move(attr.second);
    return true;
  }

  std::string path_;
  std::map<int64_t, Study> studies_;  // the live ones, by id
  std::set<std::string> names_;       // their names
  int64_t next_study_id_ = 0;
  std::vector<TrialRef> trials_;  // by trial id, deleted studies' included
};

// Calls each(text, number, terminated) for every line of the file, numbered from 1, each
// bounded by kMaxOptunaValueBytes before it is kept.
template <typename F>
absl::Status ForEachLine(const std::string& path, F&& each) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open"));
  std::vector<char> buf(1 << 16);
  std::string line;
  int64_t number = 0;
  auto bounded = [&]() -> absl::Status {
    if (number >= kMaxOptunaJournalLines) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": holds more than ", kMaxOptunaJournalLines, " lines"));
    }
    return absl::OkStatus();
  };
  while (f.read(buf.data(), static_cast<std::streamsize>(buf.size())) || f.gcount() > 0) {
    const size_t n = static_cast<size_t>(f.gcount());
    for (size_t i = 0; i < n;) {
      const char* end = static_cast<const char*>(std::memchr(buf.data() + i, '\n', n - i));
      const size_t take = end ? static_cast<size_t>(end - (buf.data() + i)) : n - i;
      if (line.size() + take > static_cast<size_t>(kMaxOptunaValueBytes)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", number + 1, ": longer than ", kMaxOptunaValueBytes, " bytes"));
      }
      line.append(buf.data() + i, take);
      i += take;
      if (end != nullptr) {
        SEXTANT_RETURN_IF_ERROR(bounded());
        SEXTANT_RETURN_IF_ERROR(each(line, ++number, true));
        line.clear();
        ++i;
      }
    }
  }
  if (f.bad()) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read"));
  if (!line.empty()) {
    SEXTANT_RETURN_IF_ERROR(bounded());
    SEXTANT_RETURN_IF_ERROR(each(line, ++number, false));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<OptunaStudy> ReadOptunaJournal(const std::string& path, const std::string& study) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read: ", ec.message()));
  if (size > static_cast<uint64_t>(kMaxOptunaJournalBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": a journal of ", size,
                                                   " bytes, past the ", kMaxOptunaJournalBytes,
                                                   " bytes an import reads"));
  }
  Replay replay(path);
  absl::Status cut;  // a line that is not JSON: an error unless it is the last
  int64_t kept = 0;  // bytes of the lines whose operations were applied
  SEXTANT_RETURN_IF_ERROR(ForEachLine(
      path, [&](const std::string& line, int64_t number, bool terminated) -> absl::Status {
        SEXTANT_RETURN_IF_ERROR(cut);
        const std::string at = absl::StrCat(path, ":", number, ": ");
        if (JsonDepth(line) > kMaxOptunaJsonDepth) {
          return absl::InvalidArgumentError(
              absl::StrCat(at, "nests deeper than ", kMaxOptunaJsonDepth, " levels"));
        }
        absl::StatusOr<OJson> op = ParsePythonJson(line);
        if (!op.ok() || !terminated) {
          cut = absl::InvalidArgumentError(
              absl::StrCat(at, op.ok() ? "has no line break" : op.status().message(),
                           " (only the last line may be cut short)"));
          return absl::OkStatus();
        }
        absl::StatusOr<bool> applied = replay.Apply(*op);
        if (!applied.ok())
          return absl::InvalidArgumentError(at + std::string(applied.status().message()));
        if (*applied && (kept += static_cast<int64_t>(line.size())) > kMaxOptunaTextBytes) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": holds more than ", kMaxOptunaTextBytes, " bytes of operations to import"));
        }
        return absl::OkStatus();
      }));
  return replay.Take(study);
}

}  // namespace sextant
