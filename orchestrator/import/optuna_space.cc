#include "orchestrator/import/optuna_space.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "orchestrator/core/experiment_loader.h"

namespace sextant {
namespace {

using Json = nlohmann::json;
using Kind = OptunaDistribution::Kind;

// Trials InferCondition may look at, all parameters together (see there).
constexpr int64_t kConditionBudget = 200'000'000;

// Python's repr() of a float: the shortest digits that round-trip, positional for decimal
// exponents in [-4, 16), else d.ddde+XX.
std::string PythonFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  const bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  const size_t e = s.find('e');
  const int exp = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (char c : s.substr(0, e)) {
    if (c != '.') digits += c;
  }
  std::string out;
  if (exp >= 16 || exp < -4) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) absl::StrAppend(&out, ".", digits.substr(1));
    absl::StrAppend(&out, exp < 0 ? "e-" : "e+", std::abs(exp) < 10 ? "0" : "", std::abs(exp));
  } else if (exp >= 0) {
    const size_t whole = static_cast<size_t>(exp) + 1;
    std::string int_part = digits.substr(0, std::min(whole, digits.size()));
    int_part.resize(whole, '0');
    out = absl::StrCat(int_part, ".", digits.size() > whole ? digits.substr(whole) : "0");
  } else {
    out = absl::StrCat("0.", std::string(-exp - 1, '0'), digits);
  }
  return negative ? "-" + out : out;
}

std::string SextantName(const std::string& optuna_name) {
  std::string out;
  for (char c : optuna_name)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(0, "p_");
  return out;
}

std::string KindName(Kind k) {
  return k == Kind::kFloat ? "float" : k == Kind::kInt ? "int" : "categorical";
}

// The step d puts its values on, or nullopt (a float without one, an int's step 1).
std::optional<double> StepOf(const OptunaDistribution& d) {
  if (d.kind == Kind::kCategorical || !d.step) return std::nullopt;
  if (d.kind == Kind::kInt && *d.step == 1) return std::nullopt;
  return d.step;
}

// Keeps p's step only while d's values lie on the same grid: the same step, and lows that
// differ by whole steps (the united min is then on every trial's grid). Once they differ
// (mixed), p has no step whatever the later trials say.
void MergeStep(ImportedParameter& p, const OptunaDistribution& d, bool& mixed) {
  if (mixed) return;
  const std::optional<double> step = StepOf(d);
  if (!p.step && !step) return;
  bool same = p.step && step && *p.step == *step;
  if (same) {
    const double k = (d.low - p.min) / *step;
    same = std::abs(k - std::round(k)) <= 1e-9 * std::max(1.0, std::abs(k));
  }
  if (same) return;
  auto shown = [&](std::optional<double> x) {
    if (!x) return std::string("none");
    return p.kind == Kind::kInt ? absl::StrCat(std::llround(*x)) : PythonFloat(*x);
  };
  const std::string why =
      p.step && step && *p.step == *step
          ? absl::StrCat("Optuna's step ", shown(step), " starts from lows not whole steps apart")
          : absl::StrCat("Optuna's step differs between trials (", shown(p.step), " and ",
                         shown(step), ")");
  p.notes.push_back(why +
                    ": no step here (the imported values lie on theirs, new trials need not)");
  p.step.reset();
  mixed = true;
}

// What Merge keeps about a parameter besides the parameter itself: sets, so that a storage with
// many distinct distributions or choices costs n log n, not n^2.
struct MergeState {
  bool step_mixed = false;
  std::set<std::string> distributions;  // dumped
  std::set<std::string> values;
};

// Folds one trial's distribution for a parameter into the parameter.
absl::Status Merge(ImportedParameter& p, const OptunaDistribution& d, bool first,
                   MergeState& state) {
  if (first) {
    p.kind = d.kind;
    p.min = d.low;
    p.max = d.high;
    p.log = d.log;
    p.step = StepOf(d);
  } else if (d.kind != p.kind) {
    return absl::InvalidArgumentError(absl::StrCat(
        "parameter ", Json(p.optuna_name).dump(), " is ", KindName(p.kind), " in some trials and ",
        KindName(d.kind), " (", d.name, ") in others; Sextant gives a parameter one type"));
  }
  if (!state.distributions.insert(d.stored.dump()).second) return absl::OkStatus();
  p.distributions.push_back(d.stored);
  if (d.kind == Kind::kCategorical) {
    std::set<std::string> own;
    for (const Json& choice : d.choices) {
      SEXTANT_ASSIGN_OR_RETURN(std::string s, PythonStr(choice));
      if (!own.insert(s).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter ", Json(p.optuna_name).dump(), ": two choices print as ",
                         Json(s).dump(), " (Sextant's categorical values are strings)"));
      }
      if (state.values.insert(s).second) p.values.push_back(s);
    }
    return absl::OkStatus();
  }
  if (!first) MergeStep(p, d, state.step_mixed);
  p.min = std::min(p.min, d.low);
  p.max = std::max(p.max, d.high);
  p.log = p.log && d.log;
  return absl::OkStatus();
}

ParamValue ValueOf(const ImportedParameter& p, const OptunaParam& op) {
  if (p.kind == Kind::kFloat) return op.internal;
  if (p.kind == Kind::kInt) return static_cast<int64_t>(std::llround(op.internal));
  return *PythonStr(op.distribution.choices[static_cast<size_t>(op.internal)]);
}

// The first earlier int or categorical parameter whose value decides whether `p` is present
// (see InferOptunaSpace); nullopt when none does, or when the search would pass `budget`
// (trials looked at, shared by all parameters): it costs parameters^2 x trials, which a
// hostile storage could make hours long.
std::optional<std::pair<std::string, std::string>> InferCondition(
    const OptunaStudy& study, const std::vector<ImportedParameter>& params, size_t index,
    const std::vector<Params>& trials, int64_t& budget) {
  const std::string& name = params[index].name;
  for (size_t c = 0; c < index; ++c) {
    const ImportedParameter& parent = params[c];
    if (parent.kind == Kind::kFloat) continue;
    budget -= 2 * static_cast<int64_t>(trials.size());
    if (budget < 0) return std::nullopt;
    std::optional<std::string> value;
    bool decides = true;
    for (size_t t = 0; t < trials.size() && decides; ++t) {
      if (!trials[t].contains(name)) continue;
      auto it = trials[t].find(parent.name);
      if (it == trials[t].end()) {
        decides = false;
      } else if (!value) {
        value = FormatParamValue(it->second);
      } else {
        decides = *value == FormatParamValue(it->second);
      }
    }
    for (size_t t = 0; t < trials.size() && decides && value; ++t) {
      auto it = trials[t].find(parent.name);
      if (study.trials[t].state == "COMPLETE" && it != trials[t].end() &&
          FormatParamValue(it->second) == *value && !trials[t].contains(name)) {
        decides = false;
      }
    }
    if (decides && value) return std::pair{parent.name, *value};
  }
  return std::nullopt;
}

// Moves single-valued parameters into constants.
void SplitConstants(ImportedSpace& space) {
  std::vector<ImportedParameter> kept;
  for (ImportedParameter& p : space.parameters) {
    const bool single = p.kind == Kind::kCategorical ? p.values.size() < 2 : !(p.min < p.max);
    if (!single) {
      kept.push_back(std::move(p));
      continue;
    }
    Json value = p.kind == Kind::kCategorical ? Json(p.values.empty() ? "" : p.values[0])
                 : p.kind == Kind::kInt       ? Json(static_cast<int64_t>(std::llround(p.min)))
                                              : Json(p.min);
    space.constants[p.optuna_name] = {{"value", value}, {"distributions", p.distributions}};
  }
  space.parameters = std::move(kept);
}

absl::Status CheckNames(const std::vector<ImportedParameter>& params) {
  std::map<std::string, std::string> seen;
  for (const ImportedParameter& p : params) {
    auto [it, fresh] = seen.emplace(p.name, p.optuna_name);
    if (!fresh) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameters ", Json(it->second).dump(), " and ", Json(p.optuna_name).dump(),
                       " would both be named '", p.name, "' in Sextant (names are [A-Za-z0-9_])"));
    }
  }
  return absl::OkStatus();
}

void AddConditions(const OptunaStudy& study, ImportedSpace& space) {
  int64_t budget = kConditionBudget;
  for (size_t i = 0; i < space.parameters.size(); ++i) {
    ImportedParameter& p = space.parameters[i];
    bool missing_in_complete = false;
    for (size_t t = 0; t < study.trials.size(); ++t) {
      if (study.trials[t].state == "WAITING" || space.trial_params[t].contains(p.name)) continue;
      p.absent_in.push_back(study.trials[t].number);
      missing_in_complete |= study.trials[t].state == "COMPLETE";
    }
    if (!missing_in_complete) {
      if (!p.absent_in.empty()) {
        p.notes.push_back(absl::StrCat("absent in ", p.absent_in.size(),
                                       " trials that did not complete (kept as they are)"));
      }
      continue;
    }
    if (auto when = InferCondition(study, space.parameters, i, space.trial_params, budget)) {
      p.when[when->first] = when->second;
      p.notes.push_back(absl::StrCat("conditional: present in exactly the completed trials with ",
                                     when->first, " = ", when->second));
    } else {
      p.notes.push_back(
          absl::StrCat("absent in ", p.absent_in.size(),
                       " trials, and no earlier int or categorical "
                       "parameter decides when: kept unconditional, those trials keep it absent"));
    }
  }
}

}  // namespace

absl::StatusOr<std::string> PythonStr(const Json& choice) {
  if (choice.is_string()) return choice.get<std::string>();
  if (choice.is_null()) return std::string("None");
  if (choice.is_boolean()) return std::string(choice.get<bool>() ? "True" : "False");
  if (choice.is_number_integer()) return choice.dump();
  if (choice.is_number_float()) return PythonFloat(choice.get<double>());
  return absl::InvalidArgumentError(absl::StrCat("categorical choice ", choice.dump(),
                                                 " is not a string, number, boolean or null"));
}

absl::StatusOr<ImportedSpace> InferOptunaSpace(const OptunaStudy& study) {
  ImportedSpace space;
  std::map<std::string, size_t> index;  // Optuna name -> parameters[]
  std::vector<MergeState> states;       // by index into parameters
  for (const OptunaTrial& t : study.trials) {
    for (const OptunaParam& op : t.params) {
      auto [it, fresh] = index.emplace(op.name, space.parameters.size());
      if (fresh) {
        if (space.parameters.size() == static_cast<size_t>(kMaxParameters)) {
          return absl::InvalidArgumentError(absl::StrCat("trial ", t.number, ": more than ",
                                                         kMaxParameters, " distinct parameters"));
        }
        space.parameters.emplace_back();
        space.parameters.back().optuna_name = op.name;
        space.parameters.back().name = SextantName(op.name);
        states.emplace_back();
      }
      absl::Status s =
          Merge(space.parameters[it->second], op.distribution, fresh, states[it->second]);
      if (!s.ok())
        return absl::InvalidArgumentError(absl::StrCat("trial ", t.number, ": ", s.message()));
    }
  }
  // Each later step looks at every parameter of every trial.
  if (static_cast<double>(space.parameters.size()) * static_cast<double>(study.trials.size()) >
      static_cast<double>(kMaxOptunaCells)) {
    return absl::InvalidArgumentError(absl::StrCat(space.parameters.size(), " parameters x ",
                                                   study.trials.size(), " trials is more than ",
                                                   kMaxOptunaCells, " to import"));
  }
  SplitConstants(space);
  SEXTANT_RETURN_IF_ERROR(CheckNames(space.parameters));
  std::map<std::string, const ImportedParameter*> by_optuna_name;
  for (ImportedParameter& p : space.parameters) {
    by_optuna_name[p.optuna_name] = &p;
    if (p.name != p.optuna_name) {
      p.notes.push_back(absl::StrCat("named ", Json(p.optuna_name).dump(), " in Optuna"));
    }
  }
  for (const OptunaTrial& t : study.trials) {
    Params params;
    for (const OptunaParam& op : t.params) {
      auto it = by_optuna_name.find(op.name);
      if (it != by_optuna_name.end()) params[it->second->name] = ValueOf(*it->second, op);
    }
    space.trial_params.push_back(std::move(params));
  }
  AddConditions(study, space);
  return space;
}

absl::StatusOr<Params> FixedParams(const ImportedSpace& space, const Json& fixed) {
  if (!fixed.is_object()) return absl::InvalidArgumentError("fixed_params is not a JSON object");
  Params out;
  std::set<std::string> used;
  for (const ImportedParameter& p : space.parameters) {
    if (!fixed.contains(p.optuna_name)) continue;
    used.insert(p.optuna_name);
    const Json& v = fixed[p.optuna_name];
    if (p.kind == Kind::kCategorical) {
      SEXTANT_ASSIGN_OR_RETURN(std::string s, PythonStr(v));
      if (std::find(p.values.begin(), p.values.end(), s) == p.values.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(p.optuna_name, " = ", v.dump(), " is not one of its choices"));
      }
      out[p.name] = s;
    } else if (!v.is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat(p.optuna_name, " = ", v.dump(), " is not a number"));
    } else if (p.kind == Kind::kInt) {
      out[p.name] = static_cast<int64_t>(std::llround(v.get<double>()));
    } else {
      out[p.name] = v.get<double>();
    }
  }
  for (const auto& [name, v] : fixed.items()) {
    if (!used.contains(name) && !space.constants.contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("fixes ", Json(name).dump(), ", which no trial of the study suggested"));
    }
  }
  for (const ImportedParameter& p : space.parameters) {
    if (p.when.empty() && !out.contains(p.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("does not fix ", Json(p.optuna_name).dump(),
                       "; Sextant runs an enqueued trial with the parameters it was given"));
    }
  }
  return out;
}

}  // namespace sextant
