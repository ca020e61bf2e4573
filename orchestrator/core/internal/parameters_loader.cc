#include "orchestrator/core/internal/parameters_loader.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <utility>
#include <variant>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/warm_start.h"

namespace sextant::loader_internal {
namespace {

constexpr std::array<absl::string_view, 3> kParamTypes = {"float", "int", "categorical"};
constexpr std::array<absl::string_view, 6> kSamplers = {"random",   "grid", "sobol",
                                                        "bayesian", "tpe",  "nsga2"};
constexpr std::array<absl::string_view, 2> kAshaModes = {"promotion", "stopping"};
constexpr std::array<absl::string_view, 2> kSearchModes = {"commands", "ask_tell"};
constexpr std::array<absl::string_view, 5> kSchedulers = {"none", "asha", "hyperband", "bohb",
                                                          "median"};

std::string FormatInt(int64_t v) { return absl::StrCat(v); }

}  // namespace

void ParametersLoader::LoadParameters(const Section& root, bool may_be_empty) {
  const Field* f = may_be_empty ? root.Find("parameters") : root.Require("parameters");
  if (f == nullptr) return;
  std::vector<Field> entries;
  if (!f->value.IsNull()) entries = r_.Entries(*f);
  if (entries.empty() && !may_be_empty && (f->value.IsNull() || f->value.IsMap())) {
    r_.KeyError(*f, "the search space has no dimensions");
  }
  if (entries.size() > static_cast<size_t>(kMaxParameters)) {
    r_.KeyError(*f, absl::StrCat("too many parameters (", entries.size(), "; at most ",
                                 kMaxParameters, ")"));
    return;
  }
  std::vector<PendingWhen> whens;
  for (const Field& e : entries) LoadParameter(e, whens);
  LoadConditions(whens);
}

void ParametersLoader::LoadParameter(const Field& f, std::vector<PendingWhen>& whens) {
  kept_.parameters.push_back(f);
  const int index = spec_.parameters_size();
  v1::Parameter* p = spec_.add_parameters();
  p->set_name(f.key.Scalar());
  if (!IsIdentifier(p->name())) {
    r_.KeyError(f,
                "invalid parameter name; use letters, digits and '_', not starting with a digit");
  }
  Section s(r_, f, {"type", "min", "max", "step", "log", "values", "grid_points", "when"});
  if (!s.ok()) return;
  if (const Field* type = s.Require("type")) {
    if (std::optional<size_t> t = r_.Choice(*type, kParamTypes)) {
      p->set_type(static_cast<v1::Parameter::Type>(*t + 1));  // FLOAT, INT, CATEGORICAL
      if (p->type() == v1::Parameter::CATEGORICAL) {
        LoadCategorical(s, p);
      } else {
        LoadRange(s, p, p->type() == v1::Parameter::INT);
      }
    }
  }
  if (const Field* when = s.Find("when")) whens.emplace_back(index, *when);
}

void ParametersLoader::LoadRange(const Section& s, v1::Parameter* p, bool integral) {
  if (const Field* values = s.Find("values")) {
    r_.KeyError(*values, "only allowed with type: categorical");
  }
  auto read = [&](const Field& f) -> std::optional<double> {
    if (!integral) return r_.Number(f);
    std::optional<int64_t> i = r_.Integer(f, -kMaxExactInt, kMaxExactInt);
    return i ? std::optional<double>(static_cast<double>(*i)) : std::nullopt;
  };
  const Field* min = s.Require("min");
  const Field* max = s.Require("max");
  std::optional<double> lo, hi;
  if (min != nullptr) lo = read(*min);
  if (max != nullptr) hi = read(*max);
  p->set_min(lo.value_or(0));
  p->set_max(hi.value_or(0));
  if (!lo.has_value() || !hi.has_value()) unranged_.insert(p->name());
  if (lo.has_value() && hi.has_value() && !(p->min() < p->max())) {
    r_.ValueError(*min, absl::StrCat("must be less than max (min ", min->value.Scalar(), ", max ",
                                     max->value.Scalar(), ")"));
  }
  IfPresent<bool>(
      s, "log", [&](const Field& f) { return r_.Bool(f); },
      [&](bool log) {
        p->set_log(log);
        if (log && lo.has_value() && !(p->min() > 0))
          r_.ValueError(*min, "must be > 0 with log: true");
      });
  IfPresent<int64_t>(
      s, "grid_points", [&](const Field& f) { return r_.Integer(f, 2, kInt32Max); },
      [&](int64_t n) { p->set_grid_points(static_cast<int32_t>(n)); });
  if (const Field* step = s.Find("step")) LoadStep(*step, p, integral);
}

// (max - min) need not be a multiple of the step: values stop at the last step below max, as
// in Optuna and Katib.
void ParametersLoader::LoadStep(const Field& f, v1::Parameter* p, bool integral) {
  std::optional<double> step;
  if (integral) {
    if (std::optional<int64_t> i = r_.Integer(f, 1, kMaxExactInt)) step = static_cast<double>(*i);
  } else {
    step = r_.NumberAbove(f, 0, /*strict=*/true);
  }
  if (!step) {
    unranged_.insert(p->name());
    return;
  }
  p->set_step(*step);
  const bool moot = integral && *step == 1;
  if (p->log() && !moot) {
    r_.KeyError(f, "not allowed with log: true (a step spaces values evenly; drop one of them)");
  } else if (!unranged_.contains(p->name()) && p->min() < p->max() &&
             !(*step <= p->max() - p->min())) {
    r_.ValueError(f, absl::StrCat("must be at most max - min (",
                                  FormatParamValue(p->max() - p->min()), "), or only min is left"));
  }
}

void ParametersLoader::LoadCategorical(const Section& s, v1::Parameter* p) {
  for (absl::string_view key : {"min", "max", "step", "log", "grid_points"}) {
    if (const Field* f = s.Find(key)) {
      r_.KeyError(*f, "not allowed with type: categorical (only with float and int)");
    }
  }
  const Field* values = s.Require("values");
  if (values == nullptr || !values->value.IsSequence()) unranged_.insert(p->name());
  if (values == nullptr) return;
  std::vector<Field> elements = r_.Elements(*values);
  if (!values->value.IsSequence()) return;
  if (elements.empty()) {
    r_.ValueError(*values, "must not be empty");
  } else if (elements.size() == 1) {
    r_.ValueError(*values, "needs at least 2 values");
  }
  std::set<std::string> seen;
  for (const Field& e : elements) {
    std::optional<std::string> v = r_.String(e);
    if (!v) continue;
    if (!seen.insert(*v).second) {
      r_.ValueError(e, absl::StrCat("duplicate value '", *v, "'"));
      continue;
    }
    p->add_values(*v);
  }
}

void ParametersLoader::LoadConditions(const std::vector<PendingWhen>& whens) {
  std::map<std::string, int> index;
  for (int i = 0; i < spec_.parameters_size(); ++i) index.emplace(spec_.parameters(i).name(), i);
  std::vector<ConditionEdge> edges;
  for (const PendingWhen& w : whens) {
    v1::Parameter* p = spec_.mutable_parameters(w.param);
    for (const Field& e : r_.Entries(w.field)) {
      const std::string& other = e.key.Scalar();
      auto it = index.find(other);
      if (other == p->name()) {
        r_.KeyError(e, "a parameter cannot depend on itself");
      } else if (it == index.end()) {
        r_.KeyError(e, absl::StrCat("no parameter named '", other, "'"));
      } else if (std::optional<std::string> v = ConditionValue(spec_.parameters(it->second), e)) {
        (*p->mutable_when())[other] = *v;
        edges.push_back({w.param, it->second, KeyPos(e), e.path});
      }
    }
  }
  CheckConditionCycles(edges);
}

// Returns the value in the form samplers compare against (FormatParamValue's), or reports why
// the target parameter cannot take it.
std::optional<std::string> ParametersLoader::ConditionValue(const v1::Parameter& target,
                                                            const Field& f) {
  if (target.type() == v1::Parameter::TYPE_UNSPECIFIED) return std::nullopt;  // reported
  if (target.type() == v1::Parameter::FLOAT) {
    r_.KeyError(f, absl::StrCat("'", target.name(),
                                "' is a float; a condition needs a categorical or int parameter"));
    return std::nullopt;
  }
  std::optional<std::string> v = r_.String(f);
  if (!v) return std::nullopt;
  if (target.type() == v1::Parameter::CATEGORICAL) {
    const auto& values = target.values();
    if (unranged_.contains(target.name())) return v;  // its values' error is reported
    if (std::find(values.begin(), values.end(), *v) != values.end()) return v;
    r_.ValueError(f, absl::StrCat("'", *v, "' is not one of ", target.name(), "'s values (",
                                  absl::StrJoin(values, ", "), ")"));
    return std::nullopt;
  }
  int64_t i = 0;
  double d = 0;
  bool integral = absl::SimpleAtoi(*v, &i);
  if (!integral && absl::SimpleAtod(*v, &d) && d == std::floor(d) &&
      std::fabs(d) <= static_cast<double>(kMaxExactInt)) {
    i = static_cast<int64_t>(d);
    integral = true;
  }
  if (integral && unranged_.contains(target.name())) return FormatInt(i);  // range reported
  const auto step = static_cast<int64_t>(std::max(1.0, target.step()));
  if (integral && i >= target.min() && i <= target.max()) {
    if ((i - static_cast<int64_t>(target.min())) % step == 0) return FormatInt(i);
    r_.ValueError(f, absl::StrCat("'", *v, "' is not one of ", target.name(), "'s values (",
                                  target.min(), " + k * ", step, ")"));
    return std::nullopt;
  }
  r_.ValueError(f, absl::StrCat("'", *v, "' is not an integer in ", target.name(), "'s range [",
                                target.min(), ", ", target.max(), "]"));
  return std::nullopt;
}

void ParametersLoader::CheckConditionCycles(const std::vector<ConditionEdge>& edges) {
  const int n = spec_.parameters_size();
  std::vector<std::vector<const ConditionEdge*>> out(n);
  for (const ConditionEdge& e : edges) out[e.from].push_back(&e);
  enum { kNew, kOnStack, kDone };
  std::vector<int> state(n, kNew);
  std::function<void(int)> visit = [&](int v) {
    state[v] = kOnStack;
    for (const ConditionEdge* e : out[v]) {
      if (state[e->to] == kOnStack) {
        r_.Error(e->pos, e->path, "conditions form a cycle");
      } else if (state[e->to] == kNew) {
        visit(e->to);
      }
    }
    state[v] = kDone;
  };
  for (int v = 0; v < n; ++v) {
    if (state[v] == kNew) visit(v);
  }
}

void ParametersLoader::LoadSearch(const Section& root) {
  v1::Search* search = spec_.mutable_search();
  search->set_sampler(v1::Search::RANDOM);
  search->set_scheduler(v1::Search::NONE);
  search->set_seed(0);
  search->set_max_trials(20);
  search->set_max_concurrent(1);
  const Field* f = root.Find("search");
  if (f == nullptr) return;
  Section s(r_, *f,
            {"sampler", "scheduler", "fidelity", "seed", "max_trials", "max_concurrent",
             "initial_design", "asha_mode", "cost_aware", "mode", "lease", "enqueue", "warm_start",
             "max_failed_trials", "max_failed_in_a_row"});
  if (!s.ok()) return;
  for (auto [key, field] :
       {std::pair{"sampler", &kept_.sampler}, std::pair{"scheduler", &kept_.scheduler},
        std::pair{"max_trials", &kept_.max_trials}, std::pair{"warm_start", &kept_.warm_start}}) {
    if (const Field* x = s.Find(key)) field->emplace(*x);
  }
  IfPresent<size_t>(
      s, "sampler", [&](const Field& x) { return r_.Choice(x, kSamplers); },
      [&](size_t i) { search->set_sampler(static_cast<v1::Search::Sampler>(i + 1)); });
  IfPresent<size_t>(
      s, "scheduler", [&](const Field& x) { return r_.Choice(x, kSchedulers); },
      [&](size_t i) { search->set_scheduler(static_cast<v1::Search::Scheduler>(i + 1)); });
  IfPresent<uint64_t>(
      s, "seed", [&](const Field& x) { return r_.Unsigned(x); },
      [&](uint64_t v) { search->set_seed(v); });
  auto positive = [&](const Field& x) { return r_.Integer(x, 1, kInt32Max); };
  IfPresent<int64_t>(s, "max_trials", positive, [&](int64_t v) { search->set_max_trials(v); });
  IfPresent<int64_t>(s, "max_concurrent", positive,
                     [&](int64_t v) { search->set_max_concurrent(v); });
  IfPresent<int64_t>(s, "initial_design", positive,
                     [&](int64_t v) { search->set_initial_design(v); });
  IfPresent<bool>(
      s, "cost_aware", [&](const Field& x) { return r_.Bool(x); },
      [&](bool v) { search->set_cost_aware(v); });
  search->set_asha_mode("promotion");
  IfPresent<size_t>(
      s, "asha_mode", [&](const Field& x) { return r_.Choice(x, kAshaModes); },
      [&](size_t i) { search->set_asha_mode(std::string(kAshaModes[i])); });
  LoadSearchMode(s, search);
  for (const char* key : {"max_failed_trials", "max_failed_in_a_row"}) {
    const Field* x = s.Find(key);
    if (x == nullptr) continue;
    if (search->mode() == v1::Search::ASK_TELL) {
      r_.KeyError(*x, "only with mode: commands (an ask/tell client decides what a failure means)");
    } else if (std::optional<int64_t> v = positive(*x)) {
      if (std::string(key) == "max_failed_trials") {
        search->set_max_failed_trials(*v);
      } else {
        search->set_max_failed_in_a_row(*v);
      }
    }
  }
  if (const Field* e = s.Find("enqueue")) LoadEnqueue(*e, search);
  if (const Field* w = s.Find("warm_start")) LoadWarmStart(*w, search);
  const Field* fidelity = s.Find("fidelity");
  if (fidelity != nullptr) {
    LoadFidelity(*fidelity, search->mutable_fidelity());
  } else if (search->scheduler() != v1::Search::NONE) {
    const Field* scheduler = s.Find("scheduler");
    r_.Error(ValuePos(*scheduler), Join(f->path, "fidelity"),
             absl::StrCat("required with scheduler: ", scheduler->value.Scalar()));
  }
}

void ParametersLoader::LoadSearchMode(const Section& s, v1::Search* search) {
  search->set_mode(v1::Search::COMMANDS);
  IfPresent<size_t>(
      s, "mode", [&](const Field& x) { return r_.Choice(x, kSearchModes); },
      [&](size_t i) { search->set_mode(static_cast<v1::Search::Mode>(i + 1)); });
  const Field* lease = s.Find("lease");
  if (lease == nullptr) return;
  if (search->mode() != v1::Search::ASK_TELL) {
    r_.KeyError(*lease, "only with mode: ask_tell (workers' leases are set by --lease-timeout)");
  } else if (std::optional<double> v = r_.Duration(*lease); v && *v <= 0) {
    r_.ValueError(*lease, "must be a positive duration (e.g. 10m)");
  } else if (v) {
    search->set_lease_seconds(*v);
  }
}

// Each entry is one point of the space, checked as the samplers' points are (CheckParams).
void ParametersLoader::LoadEnqueue(const Field& f, v1::Search* search) {
  std::vector<Field> entries = r_.Elements(f);
  if (f.value.IsSequence() && entries.empty()) r_.ValueError(f, "empty list; leave the key out");
  if (static_cast<int64_t>(entries.size()) > search->max_trials()) {
    r_.ValueError(f, absl::StrCat(entries.size(), " configurations, but search.max_trials is ",
                                  search->max_trials(), " (enqueued configurations are trials)"));
  }
  const SearchSpace space = ToSearchSpace(spec_);
  std::vector<absl::string_view> names;
  for (const ParamSpec& p : space.params) names.push_back(p.name);
  for (const Field& e : entries) {
    if (!e.value.IsMap()) {
      r_.ValueError(
          e, absl::StrCat("expected a mapping of parameter values (e.g. {",
                          names.empty() ? "lr" : names[0], ": ...}), got ", Describe(e.value)));
      continue;
    }
    const std::vector<Field> values = r_.Entries(e);
    Params params;
    std::map<std::string, const Field*> at;
    std::set<std::string> bad;  // reported already
    for (const Field& v : values) {
      const std::string& name = v.key.Scalar();
      const int index = space.IndexOf(name);
      if (index < 0) {
        std::string message =
            absl::StrCat("unknown parameter; parameters: ", absl::StrJoin(names, ", "));
        if (absl::string_view near = Nearest(name, names); !near.empty()) {
          absl::StrAppend(&message, " (did you mean '", near, "'?)");
        }
        r_.KeyError(v, message);
        continue;
      }
      std::optional<ParamValue> value = EnqueuedValue(space.params[index], v);
      if (!value) {
        bad.insert(name);
        continue;
      }
      params[name] = *value;
      at.emplace(name, &v);
    }
    for (const ParamProblem& p : CheckParams(space, params)) {
      if (bad.contains(p.param) || p.kind == ParamProblem::Kind::kUnknown) continue;
      if (p.kind == ParamProblem::Kind::kOutside && unranged_.contains(p.param)) continue;
      if (p.kind == ParamProblem::Kind::kMissing) {
        r_.ValueError(e, absl::StrCat("no value for the parameter '", p.param, "'",
                                      space.params[space.IndexOf(p.param)].when.empty()
                                          ? ""
                                          : " (its when: conditions hold here)"));
      } else {
        r_.ValueError(*at.at(p.param), absl::string_view(p.message).substr(p.param.size() + 2));
      }
    }
    v1::EnqueuedTrial* trial = search->add_enqueue();
    for (const auto& [name, value] : params) {
      v1::ParamValue& out = (*trial->mutable_params())[name];
      if (const double* d = std::get_if<double>(&value)) {
        out.set_number(*d);
      } else if (const int64_t* i = std::get_if<int64_t>(&value)) {
        out.set_integer(*i);
      } else {
        out.set_category(std::get<std::string>(value));
      }
    }
  }
}

// The value typed as the parameter takes it; its range is CheckParams's to judge.
std::optional<ParamValue> ParametersLoader::EnqueuedValue(const ParamSpec& spec, const Field& f) {
  switch (spec.kind) {
    case ParamSpec::Kind::kFloat:
      if (std::optional<double> v = r_.Number(f)) return ParamValue(*v);
      return std::nullopt;
    case ParamSpec::Kind::kInt:
      if (std::optional<int64_t> v = r_.Integer(f, -kMaxExactInt, kMaxExactInt)) {
        return ParamValue(*v);
      }
      return std::nullopt;
    case ParamSpec::Kind::kCategorical:
      if (std::optional<std::string> v = r_.String(f)) return ParamValue(*v);
      return std::nullopt;
  }
  return std::nullopt;
}

// Relative run directories are joined to the experiment file's folder, as working_dir is.
// Each must exist and share the objectives (CheckWarmStartRun); its trials are read at start.
void ParametersLoader::LoadWarmStart(const Field& f, v1::Search* search) {
  Section s(r_, f, {"runs"});
  if (!s.ok()) return;
  const Field* runs = s.Require("runs");
  if (runs == nullptr) return;
  std::vector<Field> entries = r_.Elements(*runs);
  if (runs->value.IsSequence() && entries.empty()) {
    r_.ValueError(*runs, "empty list; leave warm_start out");
  }
  std::set<std::string> seen;
  for (const Field& e : entries) {
    std::optional<std::string> v = r_.NonEmptyString(e);
    if (!v) continue;
    const std::string dir = WorkingDir(file_, *v);
    if (!seen.insert(std::filesystem::path(dir).lexically_normal().string()).second) {
      r_.ValueError(e, absl::StrCat(dir, " is listed twice"));
      continue;
    }
    if (absl::StatusOr<v1::ExperimentSpec> old = CheckWarmStartRun(dir, spec_); !old.ok()) {
      r_.ValueError(e, old.status().message());
      continue;
    }
    search->mutable_warm_start()->add_runs(dir);
  }
}

void ParametersLoader::LoadFidelity(const Field& f, v1::Fidelity* fidelity) {
  Section s(r_, f, {"name", "min", "max", "reduction_factor"});
  fidelity->set_reduction_factor(3);
  if (!s.ok()) return;
  if (const Field* name = s.Require("name")) {
    if (auto v = r_.NonEmptyString(*name)) fidelity->set_name(*v);
    kept_.fidelity_name.emplace(*name);
  }
  const Field* min = s.Require("min");
  const Field* max = s.Require("max");
  if (max != nullptr) kept_.fidelity_max.emplace(*max);
  std::optional<double> lo, hi;
  if (min != nullptr) lo = r_.NumberAbove(*min, 0, /*strict=*/true);
  if (max != nullptr) hi = r_.Number(*max);
  fidelity->set_min(lo.value_or(0));
  fidelity->set_max(hi.value_or(0));
  if (lo.has_value() && hi.has_value() && !(fidelity->min() < fidelity->max())) {
    r_.ValueError(*min, absl::StrCat("must be less than max (min ", min->value.Scalar(), ", max ",
                                     max->value.Scalar(), ")"));
  }
  IfPresent<double>(
      s, "reduction_factor", [&](const Field& x) { return r_.NumberAbove(x, 2, /*strict=*/false); },
      [&](double v) { fidelity->set_reduction_factor(v); });
}

}  // namespace sextant::loader_internal
