#include "orchestrator/core/warm_start.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/strategy_factory.h"
#include "orchestrator/core/trial_command.h"

namespace sextant {
namespace {

constexpr const char* kMetaKey = "warm_start";

std::string GoalName(const v1::Objective& o) {
  return o.goal() == v1::Objective::MAXIMIZE ? "maximize" : "minimize";
}

// JSON has no infinities: they are kept as strings, as the measurements' metrics are.
nlohmann::json Number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

double NumberFrom(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j == "inf") return std::numeric_limits<double>::infinity();
  if (j == "-inf") return -std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

// The earlier trial's parameters typed as this space types them, so that CheckParams can say
// what does not fit. A name this space lacks keeps a placeholder (CheckParams reports it).
Params Retype(const nlohmann::json& j, const SearchSpace& space) {
  Params out;
  for (const auto& [name, v] : j.items()) {
    const int index = space.IndexOf(name);
    if (index < 0) {
      out[name] = 0.0;
      continue;
    }
    const ParamSpec& spec = space.params[index];
    ParamValue value;
    if (v.is_string()) {
      value = v.get<std::string>();
    } else if (v.is_number_integer()) {
      value = v.get<int64_t>();
    } else if (v.is_number()) {
      const double d = v.get<double>();
      const bool integral = std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 0x1p53;
      value = integral && spec.kind == ParamSpec::Kind::kInt ? ParamValue(static_cast<int64_t>(d))
                                                             : ParamValue(d);
    } else {
      value = v.dump();  // true, null, a list: the wrong type for any parameter
    }
    // A float takes an integer as it is; a categorical compares its values as text.
    if (spec.kind == ParamSpec::Kind::kFloat && std::holds_alternative<int64_t>(value)) {
      value = static_cast<double>(std::get<int64_t>(value));
    } else if (spec.kind == ParamSpec::Kind::kCategorical && !v.is_string() && v.is_number()) {
      value = FormatParamValue(value);
    }
    out[name] = std::move(value);
  }
  return out;
}

std::string DropReason(const ParamProblem& p) {
  switch (p.kind) {
    case ParamProblem::Kind::kUnknown:
      return absl::StrCat("parameter '", p.param, "' not in this space");
    case ParamProblem::Kind::kMissing:
      return absl::StrCat("no value for '", p.param, "'");
    case ParamProblem::Kind::kInactive:
      return absl::StrCat("'", p.param, "' set where this space leaves it inactive");
    case ParamProblem::Kind::kOutside:
      break;
  }
  return absl::StrCat("'", p.param, "' outside this space");
}

// The last numeric value of every metric of each trial.
absl::StatusOr<std::map<int64_t, std::map<std::string, double>>> LatestMetrics(Store& store) {
  SEXTANT_ASSIGN_OR_RETURN(std::vector<MeasurementRow> ms, store.LoadMeasurements());
  std::map<int64_t, std::map<std::string, double>> latest;
  for (const MeasurementRow& m : ms) {
    nlohmann::json j = nlohmann::json::parse(m.metrics_json, nullptr, false);
    if (!j.is_object()) continue;
    for (const auto& [k, v] : j.items()) {
      if (v.is_number()) latest[m.trial_id][k] = v.get<double>();
    }
  }
  return latest;
}

// Adds the completed trials of one earlier run (its experiment `old`) to warm.
absl::Status ReadRun(const std::string& dir, const v1::ExperimentSpec& old,
                     const v1::ExperimentSpec& spec, WarmStart* warm) {
  SEXTANT_ASSIGN_OR_RETURN(auto store, Store::Open(RunDir::DbPath(dir), /*create=*/false,
                                                   /*read_only=*/true));
  SEXTANT_ASSIGN_OR_RETURN(std::vector<TrialRow> rows, store->LoadTrials());
  std::map<int64_t, std::map<std::string, double>> latest;
  if (spec.constraints_size() > 0) {
    SEXTANT_ASSIGN_OR_RETURN(latest, LatestMetrics(*store));
  }
  const SearchSpace space = ToSearchSpace(spec);
  const ObjectiveSet objectives(spec), earlier(old);
  const int run = static_cast<int>(warm->from.size()) - 1;
  for (const TrialRow& row : rows) {
    if (row.state != v1::COMPLETED) continue;
    ++warm->completed;
    const nlohmann::json j = nlohmann::json::parse(row.params_json, nullptr, false);
    Params params = Retype(j.is_object() ? j : nlohmann::json::object(), space);
    std::vector<ParamProblem> problems = CheckParams(space, params);
    if (!problems.empty()) {
      ++warm->dropped[DropReason(problems[0])];
      continue;
    }
    // Objective values by metric: the earlier run kept them in its own objective order.
    std::map<std::string, double> metrics = latest[row.id];
    std::string missing;
    for (const v1::Objective& o : objectives.objectives()) {
      std::optional<double> v;
      for (int i = 0; i < earlier.size(); ++i) {
        if (earlier.objectives()[i].metric() != o.metric()) continue;
        if (earlier.multi() && i < static_cast<int>(row.values.size())) v = row.values[i];
        if (!earlier.multi()) v = row.value;
      }
      if (v && std::isfinite(*v)) {
        metrics[o.metric()] = *v;
      } else if (missing.empty()) {
        missing = o.metric();
      }
    }
    if (!missing.empty()) {
      ++warm->dropped[absl::StrCat("no value of '", missing, "'")];
      continue;
    }
    const TrialEvaluation ev = objectives.Evaluate(metrics, row.cost.value_or(0), row.seconds);
    warm->trials.push_back(
        PriorTrial{run, row.id, std::move(params), ev.values, ev.violations, row.cost});
  }
  return absl::OkStatus();
}

}  // namespace

int WarmStart::dropped_count() const {
  int n = 0;
  for (const auto& [why, count] : dropped) n += count;
  return n;
}

std::vector<Observation> WarmStart::Observations(const ObjectiveSet& objectives) const {
  std::vector<Observation> out;
  out.reserve(trials.size());
  for (const PriorTrial& t : trials) {
    TrialEvaluation ev;
    ev.values = t.values;
    ev.violations = t.violations;
    ev.violations.resize(objectives.constraints().size(), std::numeric_limits<double>::infinity());
    out.push_back(objectives.ToObservation(t.params, Observation::Outcome::kCompleted, ev, t.cost));
  }
  return out;
}

std::string WarmStart::Summary() const {
  std::vector<int> used(from.size(), 0);
  for (const PriorTrial& t : trials) ++used[t.run];
  std::vector<std::string> runs;
  for (size_t i = 0; i < from.size(); ++i) {
    runs.push_back(absl::StrCat(from[i], ": ", used[i], " used"));
  }
  std::string s = absl::StrCat(trials.size(), " prior observations from ", from.size(),
                               from.size() == 1 ? " run" : " runs", " (", absl::StrJoin(runs, "; "),
                               "), of ", completed, " completed trials");
  if (dropped.empty()) return s;
  std::vector<std::string> why;
  for (const auto& [reason, count] : dropped) why.push_back(absl::StrCat(count, " ", reason));
  return absl::StrCat(s, "; ", dropped_count(), " dropped: ", absl::StrJoin(why, ", "));
}

std::string WarmStart::ToJson() const {
  nlohmann::json j = {{"from", from},
                      {"observations", trials.size()},
                      {"completed", completed},
                      {"dropped", dropped},
                      {"trials", nlohmann::json::array()}};
  for (const PriorTrial& t : trials) {
    nlohmann::json values = nlohmann::json::array(), violations = nlohmann::json::array();
    for (double v : t.values) values.push_back(Number(v));
    for (double v : t.violations) violations.push_back(Number(v));
    j["trials"].push_back({{"run", t.run},
                           {"trial", t.trial},
                           {"params", nlohmann::json::parse(ParamsToJson(t.params))},
                           {"values", std::move(values)},
                           {"violations", std::move(violations)},
                           {"cost", t.cost ? nlohmann::json(*t.cost) : nlohmann::json(nullptr)}});
  }
  return j.dump();
}

absl::StatusOr<WarmStart> WarmStart::FromJson(const std::string& json, const SearchSpace& space) {
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  auto corrupt = [](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat("store: the recorded warm start is corrupt (", what, ")"));
  };
  if (!j.is_object() || !j.contains("from") || !j["from"].is_array() ||
      !j.value("trials", nlohmann::json()).is_array()) {
    return corrupt("not an object with from and trials");
  }
  WarmStart w;
  for (const auto& f : j["from"]) w.from.push_back(f.is_string() ? f.get<std::string>() : "");
  w.completed = j.value("completed", 0);
  if (j.contains("dropped") && j["dropped"].is_object()) {
    for (const auto& [why, n] : j["dropped"].items())
      w.dropped[why] = n.is_number() ? n.get<int>() : 0;
  }
  for (const auto& t : j["trials"]) {
    if (!t.is_object() || !t.contains("params")) return corrupt("a trial without params");
    PriorTrial p;
    p.run = t.value("run", 0);
    p.trial = t.value("trial", int64_t{0});
    SEXTANT_ASSIGN_OR_RETURN(p.params, ParamsFromJson(t["params"].dump(), space));
    for (const auto& v : t.value("values", nlohmann::json::array()))
      p.values.push_back(NumberFrom(v));
    for (const auto& v : t.value("violations", nlohmann::json::array())) {
      p.violations.push_back(NumberFrom(v));
    }
    if (t.contains("cost") && t["cost"].is_number()) p.cost = t["cost"].get<double>();
    w.trials.push_back(std::move(p));
  }
  return w;
}

absl::StatusOr<v1::ExperimentSpec> CheckWarmStartRun(const std::string& dir,
                                                     const v1::ExperimentSpec& spec) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("run directory ", dir, " does not exist"));
  }
  if (!std::filesystem::exists(RunDir::DbPath(dir), ec)) {
    return absl::NotFoundError(absl::StrCat(dir, " is not a Sextant run directory (no state.db)"));
  }
  SEXTANT_ASSIGN_OR_RETURN(auto store, Store::Open(RunDir::DbPath(dir), /*create=*/false,
                                                   /*read_only=*/true));
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> bytes, store->GetMeta("spec"));
  v1::ExperimentSpec old;
  if (!bytes || !old.ParseFromString(*bytes)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " holds no experiment"));
  }
  const ObjectiveSet objectives(spec), earlier(old);
  std::vector<std::string> theirs;
  for (const v1::Objective& o : earlier.objectives()) {
    theirs.push_back(absl::StrCat("'", o.metric(), "' (", GoalName(o), ")"));
  }
  for (const v1::Objective& o : objectives.objectives()) {
    const v1::Objective* match = nullptr;
    for (const v1::Objective& e : earlier.objectives()) {
      if (e.metric() == o.metric()) match = &e;
    }
    if (match == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "run ", dir, " did not measure the objective '", o.metric(), "': its objectives are ",
          absl::StrJoin(theirs, ", "), "; warm start needs runs of the same metric"));
    }
    if (match->goal() != o.goal()) {
      return absl::InvalidArgumentError(
          absl::StrCat("run ", dir, " had the goal ", GoalName(*match), " for '", o.metric(),
                       "', this experiment has ", GoalName(o), "; warm start needs the same goal"));
    }
  }
  return old;
}

absl::StatusOr<WarmStart> ReadWarmStart(const v1::ExperimentSpec& spec) {
  WarmStart warm;
  for (const std::string& dir : spec.search().warm_start().runs()) {
    SEXTANT_ASSIGN_OR_RETURN(v1::ExperimentSpec old, CheckWarmStartRun(dir, spec));
    warm.from.push_back(std::filesystem::absolute(dir).lexically_normal().string());
    SEXTANT_RETURN_IF_ERROR(ReadRun(dir, old, spec, &warm));
  }
  return warm;
}

absl::Status RecordWarmStart(const WarmStart& warm, const v1::ExperimentSpec& spec, Store* store,
                             double now) {
  if (warm.empty()) return absl::OkStatus();
  SEXTANT_RETURN_IF_ERROR(store->PutMeta(kMetaKey, warm.ToJson()));
  std::string message = warm.Summary();
  if (!LearnsFromObservations(spec)) {
    absl::StrAppend(&message, "; the ",
                    absl::AsciiStrToLower(v1::Search::Sampler_Name(spec.search().sampler())),
                    " sampler does not learn from observations, so they are recorded but unused");
  }
  return store->AddEvent(now, kMetaKey, 0, message);
}

absl::StatusOr<std::optional<WarmStart>> LoadStoredWarmStart(Store* store,
                                                             const v1::ExperimentSpec& spec) {
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> json, store->GetMeta(kMetaKey));
  if (!json) return std::nullopt;
  SEXTANT_ASSIGN_OR_RETURN(WarmStart warm, WarmStart::FromJson(*json, ToSearchSpace(spec)));
  return warm;
}

absl::StatusOr<WarmStart> PrepareWarmStart(const v1::ExperimentSpec& spec, Store* store,
                                           double now) {
  SEXTANT_ASSIGN_OR_RETURN(std::optional<WarmStart> stored, LoadStoredWarmStart(store, spec));
  if (stored) return *std::move(stored);
  SEXTANT_ASSIGN_OR_RETURN(WarmStart warm, ReadWarmStart(spec));
  if (warm.empty()) return warm;
  SEXTANT_RETURN_IF_ERROR(store->Begin());
  if (absl::Status s = RecordWarmStart(warm, spec, store, now); !s.ok()) {
    store->Rollback();
    return s;
  }
  SEXTANT_RETURN_IF_ERROR(store->Commit());
  return warm;
}

absl::StatusOr<std::unique_ptr<Sampler>> MakeRunSampler(const v1::ExperimentSpec& spec,
                                                        Store* store, double now) {
  SEXTANT_ASSIGN_OR_RETURN(WarmStart warm, PrepareWarmStart(spec, store, now));
  return MakeSampler(spec, warm.Observations(ObjectiveSet(spec)));
}

}  // namespace sextant
