#include "orchestrator/import/optuna_import.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/trial_command.h"
#include "orchestrator/import/internal/yaml_scalar.h"
#include "orchestrator/import/optuna_space.h"
#include "orchestrator/import/optuna_storage.h"

namespace sextant {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Kind = OptunaDistribution::Kind;

// The metric key of the intermediate values' steps (their fidelity).
constexpr const char* kStepKey = "step";
// User attributes become metrics under this prefix (Optuna's trials_dataframe column names).
constexpr const char* kUserAttrPrefix = "user_attrs_";
// The metric that keeps each trial's Optuna number: ids shift by one (Optuna counts from 0),
// and the number is what Optuna's dashboards, logs and user code call the trial.
constexpr const char* kOptunaNumberKey = "optuna_number";
constexpr size_t kMaxMetricBytes = 256;

// One trial as it will be stored.
struct ImportedTrial {
  TrialRow row;
  std::vector<std::string> measurements;  // metrics JSON, in sequence order
  std::string note;                       // an event about the mapping, when there is one
  double started = 0;                     // the attempt's start (0: never started)
};

// Everything that goes into the run directory, prepared before anything is written.
struct Plan {
  OptunaStudy study;
  ImportedSpace space;
  std::vector<std::string> metrics;
  std::vector<ImportedTrial> trials;
  std::string name;
  std::string yaml;
  v1::ExperimentSpec spec;
  double imported_at = 0;
  int max_trials = 0;
};

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// The shortest text that reads back as v (YAML and SimpleAtod both take it).
std::string Number(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

absl::StatusOr<std::vector<std::string>> MetricNames(const OptunaImportOptions& options,
                                                     const OptunaStudy& study) {
  const size_t n = study.directions.size();
  std::vector<std::string> names = options.metrics;
  if (names.empty()) {
    const Json& stored = study.system_attrs.contains("study:metric_names")
                             ? study.system_attrs["study:metric_names"]
                             : Json();
    if (stored.is_array() && stored.size() == n &&
        std::all_of(stored.begin(), stored.end(), [](const Json& j) { return j.is_string(); })) {
      for (const Json& j : stored) names.push_back(j.get<std::string>());
    } else if (n == 1) {
      names = {"value"};
    } else {
      for (size_t i = 0; i < n; ++i) names.push_back(absl::StrCat("values_", i));
    }
  }
  if (names.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("--metric names ", names.size(), " metric",
                                                   names.size() == 1 ? "" : "s", "; the study has ",
                                                   n, " objective", n == 1 ? "" : "s"));
  }
  std::set<std::string> seen;
  for (const std::string& m : names) {
    const bool controls = std::any_of(m.begin(), m.end(), [](char c) {
      return static_cast<unsigned char>(c) < 0x20 || c == 0x7F;
    });
    if (m.empty() || m.size() > kMaxMetricBytes || !IsUtf8(m) || controls || m == kStepKey ||
        m == kOptunaNumberKey || m.find_first_of(" =") != std::string::npos ||
        absl::StartsWith(m, kUserAttrPrefix) || !seen.insert(m).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metric name ", YamlQuoted(m),
          " cannot be used: names must be distinct, non-empty UTF-8 of at most ", kMaxMetricBytes,
          " bytes, without spaces, control characters or '=', "
          "and not '",
          kStepKey, "', '", kOptunaNumberKey, "' or ", kUserAttrPrefix, "..."));
    }
  }
  return names;
}

// The metrics JSON of an intermediate value: {"step": S, "<first metric>": V}.
std::string StepMeasurement(const std::string& metric, int64_t step, double v) {
  google::protobuf::Map<std::string, double> m;
  m[metric] = v;
  Json j = Json::parse(MetricsToJson(m));
  j[kStepKey] = step;
  return j.dump();
}

// The final measurement: the objectives' values, the user attributes (numbers and strings
// as they are, anything else as its JSON text) and, for a trial that ran, its Optuna number.
// Empty when there is nothing to say.
std::string FinalMeasurement(const std::vector<std::string>& metrics, const OptunaTrial& t,
                             bool ran) {
  google::protobuf::Map<std::string, double> m;
  for (size_t i = 0; i < t.values.size() && i < metrics.size(); ++i) {
    if (t.values[i]) m[metrics[i]] = *t.values[i];
  }
  Json j = Json::parse(MetricsToJson(m));
  for (const auto& [key, v] : t.user_attrs.items()) {
    j[kUserAttrPrefix + key] = v.is_number() || v.is_string() ? v : Json(v.dump());
  }
  if (ran) j[kOptunaNumberKey] = t.number;
  return j.empty() ? "" : j.dump();
}

// Maps an Optuna state onto a Sextant one, and the trial's params (WAITING: its fixed_params).
absl::Status MapState(const Plan& plan, size_t index, ImportedTrial& out) {
  const OptunaTrial& t = plan.study.trials[index];
  TrialRow& row = out.row;
  Params params = plan.space.trial_params[index];
  if (t.state == "COMPLETE") {
    row.state = v1::COMPLETED;
  } else if (t.state == "PRUNED") {
    row.state = v1::PRUNED;
  } else if (t.state == "FAIL") {
    row.state = v1::FAILED;
    row.failures = 1;
    const Json& why =
        t.system_attrs.contains("fail_reason") ? t.system_attrs["fail_reason"] : Json();
    row.error = why.is_string() ? why.get<std::string>() : "FAIL in Optuna (it stores no reason)";
  } else if (t.state == "RUNNING") {
    row.state = v1::CANCELLED;
    out.note =
        "RUNNING in Optuna when imported (no result was told): CANCELLED here, so it "
        "is asked for again when the search continues";
  } else if (t.state == "WAITING") {
    const Json fixed =
        t.system_attrs.contains("fixed_params") ? t.system_attrs["fixed_params"] : Json::object();
    absl::StatusOr<Params> p = FixedParams(plan.space, fixed);
    if (p.ok()) {
      params = *std::move(p);
      row.state = v1::PENDING;
      out.note = "WAITING (enqueued) in Optuna: PENDING here, with the parameters it was given";
    } else {
      row.state = v1::FAILED;
      row.error =
          absl::StrCat("enqueued in Optuna with ", fixed.dump(), ", which ", p.status().message());
      out.note = row.error;
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("trial ", t.number, ": unknown state ", YamlQuoted(t.state)));
  }
  row.params_json = ParamsToJson(params);
  return absl::OkStatus();
}

absl::StatusOr<ImportedTrial> MapTrial(const Plan& plan, size_t index) {
  const OptunaTrial& t = plan.study.trials[index];
  ImportedTrial out;
  TrialRow& row = out.row;
  row.id = static_cast<int64_t>(index) + 1;
  SEXTANT_RETURN_IF_ERROR(MapState(plan, index, out));
  const double start = t.started_at;
  const double end = t.completed_at;
  const bool started = row.state != v1::PENDING && t.state != "WAITING";
  row.attempts = started ? 1 : 0;
  out.started = started ? (start > 0 ? start : plan.imported_at) : 0;
  row.created_at = start > 0 ? start : plan.imported_at;
  if (row.state == v1::COMPLETED || row.state == v1::PRUNED || row.state == v1::FAILED) {
    row.finished_at = end > 0 ? end : row.created_at;
  }
  if (start > 0 && end >= start) row.seconds = end - start;
  if (row.state == v1::COMPLETED || row.state == v1::PRUNED) {
    if (!t.values.empty() && t.values[0]) row.value = *t.values[0];
    if (plan.metrics.size() > 1 && t.values.size() == plan.metrics.size() &&
        std::all_of(t.values.begin(), t.values.end(),
                    [](const auto& v) { return v.has_value(); })) {
      for (const auto& v : t.values) row.values.push_back(*v);
    }
  }
  for (const auto& [step, v] : t.intermediate) {
    out.measurements.push_back(StepMeasurement(plan.metrics[0], step, v));
    row.fidelity = std::max(row.fidelity, static_cast<double>(step));
  }
  if (std::string final = FinalMeasurement(plan.metrics, t, started); !final.empty()) {
    out.measurements.push_back(std::move(final));
  }
  if (row.state == v1::FAILED && started && out.note.empty()) out.note = row.error;
  return out;
}

// The range of the steps that carry intermediate values, as a fidelity (min > 0, min < max).
std::optional<std::pair<int64_t, int64_t>> StepRange(const OptunaStudy& study) {
  std::optional<int64_t> lo, hi;
  for (const OptunaTrial& t : study.trials) {
    for (const auto& [step, v] : t.intermediate) {
      if (step > 0) lo = std::min(lo.value_or(step), step);
      hi = std::max(hi.value_or(step), step);
    }
  }
  if (!lo || !hi || !(*lo < *hi)) return std::nullopt;
  return std::pair{*lo, *hi};
}

std::string ParameterYaml(const ImportedParameter& p) {
  std::string out;
  for (const std::string& note : p.notes) {
    absl::StrAppend(&out, "  # ", p.name, ": ", YamlCommentText(note), "\n");
  }
  absl::StrAppend(&out, "  ", YamlKey(p.name), ": {type: ");
  if (p.kind == Kind::kCategorical) {
    std::vector<std::string> values;
    for (const std::string& v : p.values) values.push_back(YamlQuoted(v));
    absl::StrAppend(&out, "categorical, values: [", absl::StrJoin(values, ", "), "]");
  } else if (p.kind == Kind::kInt) {
    absl::StrAppend(&out, "int, min: ", std::llround(p.min), ", max: ", std::llround(p.max));
  } else {
    absl::StrAppend(&out, "float, min: ", Number(p.min), ", max: ", Number(p.max));
  }
  if (p.step && p.kind == Kind::kInt) absl::StrAppend(&out, ", step: ", std::llround(*p.step));
  if (p.step && p.kind == Kind::kFloat) absl::StrAppend(&out, ", step: ", Number(*p.step));
  if (p.log) absl::StrAppend(&out, ", log: true");
  if (!p.when.empty()) {
    std::vector<std::string> conds;
    for (const auto& [parent, value] : p.when)
      conds.push_back(absl::StrCat(YamlKey(parent), ": ", YamlQuoted(value)));
    absl::StrAppend(&out, ", when: {", absl::StrJoin(conds, ", "), "}");
  }
  return out + "}\n";
}

// Where a study came from, for a comment or an event: the schema and the Optuna that created
// an SQLite storage, or the journal.
std::string Provenance(const OptunaStudy& s) {
  if (s.format == "journal") return "an Optuna journal file";
  return absl::StrCat("schema ", YamlQuoted(s.alembic_version), ", written by Optuna ",
                      YamlQuoted(s.library_version));
}

// Every string in these comments that did not come from this file is escaped: a line break in
// a study's name, its Optuna version or a path would end the comment and start YAML.

std::string HeaderYaml(const Plan& plan, const std::string& given_dir) {
  const std::string dir = YamlCommentText(fs::path(given_dir).lexically_normal().string());
  const OptunaStudy& s = plan.study;
  std::map<std::string, int> states;
  for (const OptunaTrial& t : s.trials) ++states[t.state];
  std::vector<std::string> counts;
  for (const auto& [state, n] : states) counts.push_back(absl::StrCat(n, " ", state));
  std::vector<std::string> tokens;
  for (const std::string& m : plan.metrics)
    tokens.push_back(absl::StrCat(YamlCommentText(m), "=0.123"));
  const std::string abs_dir = YamlCommentText(fs::absolute(given_dir).lexically_normal().string());
  std::string out = absl::StrCat(
      "# Generated by `sextant import optuna` from the study ", YamlQuoted(s.name), " in\n# ",
      YamlCommentText(fs::absolute(s.storage).lexically_normal().string()), " (", Provenance(s),
      "):\n# ", s.trials.size(), " trials (", absl::StrJoin(counts, ", "),
      "), stored in this folder as trials 1 to ", s.trials.size(),
      "\n# (Sextant trial id = Optuna trial number + 1; a trial that ran keeps its number as\n"
      "# the metric ",
      kOptunaNumberKey,
      ").\n"
      "#\n"
      "# This is the experiment the run in this folder keeps: `sextant results`, `report` and\n"
      "# `resume` read it from state.db, not from this file. Like the Optuna study, it runs in\n"
      "# ask/tell mode: your own loop asks for trials and tells their results. The imported\n"
      "# trials count toward search.max_trials (set by `import optuna --max-trials`); while it\n"
      "# leaves room, continue the search with\n"
      "#   sextant resume ",
      dir,
      "\n"
      "#     and ask and tell from Python: sextant.open_run(\"",
      dir,
      "\")\n"
      "#   or, with no process running:\n"
      "#     sextant ask ",
      dir,
      "\n"
      "#     sextant tell ",
      dir, " TRIAL --value", plan.metrics.size() > 1 ? "s V1,V2" : " V",
      "\n"
      "# Intermediate values are reported at \"",
      kStepKey, "\" (tell --step S --metrics ", YamlCommentText(plan.metrics[0]),
      "=V).\n"
      "#\n"
      "# To run your objective as a command instead: copy this file next to your objective\n"
      "# script (a trial runs in the experiment file's folder), replace `mode: ask_tell` by a\n"
      "# trial block,\n"
      "#   trial: {command: [python3, objective.py, \"--",
      plan.space.parameters[0].name, "=${", plan.space.parameters[0].name,
      "}\"]}\n"
      "# (parameters arrive as ${name}, SEXTANT_PARAMS and SEXTANT_PARAM_<NAME>; it prints\n"
      "# \"",
      absl::StrJoin(tokens, " "), "\"), add `warm_start: {runs: [", abs_dir,
      "]}`\n"
      "# under search: so that the sampler starts from these trials, and start a new run:\n"
      "#   sextant run experiment.yaml --run-dir runs/",
      plan.name,
      "-2\n"
      "#\n"
      "# Categorical values are Python's str() of Optuna's choices. User attributes are the\n"
      "# metrics ",
      kUserAttrPrefix,
      "<key>; everything else Optuna stored is in state.db's meta "
      "\"optuna_import\".\n");
  if (!plan.space.constants.empty()) {
    absl::StrAppend(&out, "# Constant in every trial, so not searched here:\n");
    for (const auto& [name, c] : plan.space.constants.items()) {
      absl::StrAppend(&out, "#   ", YamlQuoted(name), " = ", YamlCommentText(c["value"].dump()),
                      "\n");
    }
  }
  return out;
}

std::string ExperimentYaml(const Plan& plan, const std::string& dir) {
  std::string out = HeaderYaml(plan, dir);
  absl::StrAppend(&out, "name: ", YamlQuoted(plan.name), "\n");
  auto goal = [](const std::string& d) { return d == "MAXIMIZE" ? "maximize" : "minimize"; };
  if (plan.metrics.size() == 1) {
    absl::StrAppend(&out, "objective: {metric: ", YamlQuoted(plan.metrics[0]),
                    ", goal: ", goal(plan.study.directions[0]), "}\n");
  } else {
    absl::StrAppend(&out, "objectives:\n");
    for (size_t i = 0; i < plan.metrics.size(); ++i) {
      absl::StrAppend(&out, "  - {metric: ", YamlQuoted(plan.metrics[i]),
                      ", goal: ", goal(plan.study.directions[i]), "}\n");
    }
  }
  absl::StrAppend(&out, "parameters:\n");
  for (const ImportedParameter& p : plan.space.parameters) absl::StrAppend(&out, ParameterYaml(p));
  // Optuna's defaults: TPE for one objective, NSGA-II for several; the median pruner.
  absl::StrAppend(&out, "search:\n  mode: ask_tell\n  sampler: ",
                  plan.metrics.size() == 1 ? "tpe" : "nsga2", "\n");
  const bool pruned = std::any_of(plan.study.trials.begin(), plan.study.trials.end(),
                                  [](const OptunaTrial& t) { return t.state == "PRUNED"; });
  if (auto steps = StepRange(plan.study)) {
    if (pruned && plan.metrics.size() == 1) {
      absl::StrAppend(&out,
                      "  # Some trials were pruned: Optuna's default pruner is the median rule.\n"
                      "  scheduler: median\n");
    }
    absl::StrAppend(&out, "  fidelity: {name: ", kStepKey, ", min: ", steps->first,
                    ", max: ", steps->second, "}\n");
  }
  absl::StrAppend(&out, "  max_trials: ", plan.max_trials, "\n");
  // An Optuna study takes asks from as many workers as run: room for several at once.
  absl::StrAppend(&out, "  max_concurrent: ", kImportedConcurrent, "\n");
  return out;
}

// Loads the generated file as `sextant run` would, so that the stored spec is exactly what the
// loader makes of experiment.yaml.
absl::Status LoadSpec(Plan& plan, const std::string& yaml_path) {
  LoadResult loaded = LoadExperimentFromString(plan.yaml, yaml_path);
  if (!loaded.ok()) {
    std::vector<std::string> errors;
    for (const LoadError& e : loaded.errors) errors.push_back(e.ToString());
    return absl::InvalidArgumentError(absl::StrCat(
        "the study cannot be expressed as a Sextant experiment:\n", absl::StrJoin(errors, "\n")));
  }
  plan.spec = loaded.spec;
  return absl::OkStatus();
}

Json ImportRecord(const Plan& plan) {
  const OptunaStudy& s = plan.study;
  Json params = Json::array();
  for (const ImportedParameter& p : plan.space.parameters) {
    params.push_back({{"name", p.name},
                      {"optuna_name", p.optuna_name},
                      {"distributions", p.distributions},
                      {"absent_in", p.absent_in},
                      {"notes", p.notes}});
  }
  Json trials = Json::array();
  for (size_t i = 0; i < s.trials.size(); ++i) {
    const OptunaTrial& t = s.trials[i];
    trials.push_back({{"id", i + 1},
                      {"number", t.number},
                      {"trial_id", t.trial_id},
                      {"state", t.state},
                      {"datetime_start", t.datetime_start},
                      {"datetime_complete", t.datetime_complete},
                      {"user_attrs", t.user_attrs},
                      {"system_attrs", t.system_attrs}});
  }
  return {{"storage", fs::absolute(s.storage).lexically_normal().string()},
          {"study", s.name},
          {"study_id", s.study_id},
          {"format", s.format},
          {"alembic_version", s.alembic_version},
          {"schema_version", s.schema_version},
          {"library_version", s.library_version},
          {"directions", s.directions},
          {"metrics", plan.metrics},
          {"fidelity_key", kStepKey},
          {"user_attrs_prefix", kUserAttrPrefix},
          {"user_attrs", s.user_attrs},
          {"system_attrs", s.system_attrs},
          {"imported_at", plan.imported_at},
          {"parameters", std::move(params)},
          {"constants", plan.space.constants},
          {"trials", std::move(trials)}};
}

// The outcome of an imported trial's one attempt: the state Optuna left the trial in (MapState).
v1::AttemptOutcome ImportedOutcome(v1::TrialState state) {
  switch (state) {
    case v1::COMPLETED:
      return v1::ATTEMPT_COMPLETED;
    case v1::PRUNED:
      return v1::ATTEMPT_PRUNED;
    case v1::FAILED:
      return v1::ATTEMPT_FAILED;
    default:
      return v1::ATTEMPT_CANCELLED;  // RUNNING in Optuna
  }
}

absl::Status WriteTrial(Store& store, const ImportedTrial& t) {
  SEXTANT_RETURN_IF_ERROR(store.PutTrial(t.row));
  if (t.row.attempts > 0) {
    SEXTANT_RETURN_IF_ERROR(store.StartAttempt(t.row.id, 1, /*worker_id=*/0, t.started));
    const int exit_code = t.row.state == v1::FAILED ? 1 : t.row.state == v1::CANCELLED ? -1 : 0;
    const std::string error =
        t.row.state == v1::CANCELLED ? "RUNNING in Optuna when imported" : t.row.error;
    SEXTANT_RETURN_IF_ERROR(
        store.FinishAttempt(t.row.id, 1, ImportedOutcome(t.row.state), exit_code, error,
                            t.row.finished_at > 0 ? t.row.finished_at : t.started));
  }
  for (size_t i = 0; i < t.measurements.size(); ++i) {
    MeasurementRow m;
    m.trial_id = t.row.id;
    m.attempt = 1;
    m.sequence = static_cast<int64_t>(i) + 1;
    m.metrics_json = t.measurements[i];
    SEXTANT_RETURN_IF_ERROR(store.AddMeasurement(m).status());
  }
  return absl::OkStatus();
}

// Everything in one transaction: the store holds the whole import or nothing.
absl::Status WriteStore(const Plan& plan, const std::string& db_path) {
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(db_path, /*create=*/true));
  SEXTANT_RETURN_IF_ERROR(store->Begin());
  double started = plan.imported_at, finished = 0;
  bool open = false;
  for (const ImportedTrial& t : plan.trials) {
    started = std::min(started, t.row.created_at);
    finished = std::max(finished, t.row.finished_at);
    open |= t.row.state == v1::PENDING || t.row.state == v1::CANCELLED;
  }
  absl::Status s = store->PutMeta("spec", plan.spec.SerializeAsString());
  if (s.ok()) s = store->PutTimeMeta("started_at", started);
  if (s.ok()) s = store->PutTimeMeta("finished_at", finished > 0 ? finished : plan.imported_at);
  if (s.ok()) s = store->SetRunState(open ? v1::RUN_INTERRUPTED : v1::RUN_COMPLETED);
  // The storage path comes from the command line and need not be UTF-8.
  if (s.ok()) {
    s = store->PutMeta("optuna_import",
                       ImportRecord(plan).dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  for (size_t i = 0; s.ok() && i < plan.trials.size(); ++i) s = WriteTrial(*store, plan.trials[i]);
  for (size_t i = 0; s.ok() && i < plan.trials.size(); ++i) {
    if (!plan.trials[i].note.empty()) {
      s = store->AddEvent(plan.imported_at, "optuna_import", plan.trials[i].row.id,
                          plan.trials[i].note);
    }
  }
  if (s.ok()) {
    s = store->AddEvent(
        plan.imported_at, "optuna_import", 0,
        absl::StrCat("imported ", plan.trials.size(), " trials of the Optuna study ",
                     YamlQuoted(plan.study.name), " from ",
                     YamlCommentText(fs::absolute(plan.study.storage).lexically_normal().string()),
                     " (", Provenance(plan.study), ")"));
  }
  if (!s.ok()) {
    store->Rollback();
    return s;
  }
  return store->Commit();
}

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) return absl::InternalError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

bool ExistsNonEmpty(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return false;
  return !fs::is_directory(dir, ec) || !fs::is_empty(dir, ec);
}

// Writes the run directory into a temporary sibling and renames it into place.
absl::Status WriteRunDir(Plan& plan, const std::string& dir) {
  const fs::path target = fs::path(dir).lexically_normal();
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  fs::path created;  // the outermost parent this import created, removed again on failure
  for (fs::path p = parent; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created = p;
    if (!p.has_parent_path() || p.parent_path() == p) break;
  }
  fs::create_directories(parent, ec);
  if (ec)
    return absl::InternalError(absl::StrCat(parent.string(), ": cannot create: ", ec.message()));
  const fs::path tmp = parent / absl::StrCat(".", target.filename().string(), ".import-", getpid());
  absl::Status s = [&]() -> absl::Status {
    fs::remove_all(tmp, ec);
    {
      SEXTANT_ASSIGN_OR_RETURN(RunDir run_dir, RunDir::Acquire(tmp.string()));
      SEXTANT_RETURN_IF_ERROR(WriteStore(plan, run_dir.db_path()));
    }
    SEXTANT_RETURN_IF_ERROR(WriteFile((tmp / "experiment.yaml").string(), plan.yaml));
    if (ExistsNonEmpty(target.string())) {
      return absl::AlreadyExistsError(
          absl::StrCat(dir, " appeared while importing; nothing written"));
    }
    fs::rename(tmp, target, ec);
    if (ec)
      return absl::InternalError(
          absl::StrCat("cannot rename ", tmp.string(), " to ", dir, ": ", ec.message()));
    return absl::OkStatus();
  }();
  if (!s.ok()) {
    fs::remove_all(tmp, ec);
    if (!created.empty()) fs::remove_all(created, ec);
  }
  return s;
}

// options.storage and options.study are those of `study`, read already.
absl::StatusOr<Plan> MakePlan(const OptunaImportOptions& options, OptunaStudy study,
                              const std::string& dir, Clock* clock) {
  Plan plan;
  plan.imported_at = UnixSeconds(clock->Now());
  plan.study = std::move(study);
  const std::string where = absl::StrCat(options.storage, ": study ", YamlQuoted(options.study));
  if (plan.study.directions.empty())
    return absl::InvalidArgumentError(absl::StrCat(where, " has no directions"));
  if (plan.study.trials.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has no trials; there is nothing to import"));
  }
  for (const std::string& d : plan.study.directions) {
    if (d != "MINIMIZE" && d != "MAXIMIZE") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unsupported direction ", YamlQuoted(d)));
    }
  }
  auto metrics = MetricNames(options, plan.study);
  if (!metrics.ok())
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", metrics.status().message()));
  plan.metrics = *std::move(metrics);
  auto space = InferOptunaSpace(plan.study);
  if (!space.ok())
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", space.status().message()));
  plan.space = *std::move(space);
  if (plan.space.parameters.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " has no parameter that varies; Sextant needs a search space"));
  }
  plan.name = SanitizedStudyName(plan.study.name);
  const int n = static_cast<int>(plan.study.trials.size());
  plan.max_trials = options.max_trials == 0 ? n + kImportedRoom : options.max_trials;
  if (plan.max_trials < n) {
    return absl::InvalidArgumentError(absl::StrCat("--max-trials ", options.max_trials,
                                                   " is below the ", n, " trials of ", where,
                                                   " (they count toward it)"));
  }
  for (size_t i = 0; i < plan.study.trials.size(); ++i) {
    auto t = MapTrial(plan, i);
    if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", t.status().message()));
    plan.trials.push_back(*std::move(t));
  }
  plan.yaml = ExperimentYaml(plan, dir);
  absl::Status s =
      LoadSpec(plan, (fs::absolute(dir).lexically_normal() / "experiment.yaml").string());
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", s.message()));
  return plan;
}

}  // namespace

absl::StatusOr<std::string> OptunaStoragePath(const std::string& storage) {
  constexpr absl::string_view kSqlite = "sqlite:///";
  if (absl::StartsWith(storage, kSqlite)) {
    std::string path = storage.substr(kSqlite.size());
    path = path.substr(0, path.find('?'));  // SQLAlchemy's query options (?timeout=...)
    if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(storage, ": names no file"));
    return path;
  }
  if (const size_t scheme = storage.find("://"); scheme != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        storage,
        ": only SQLite storages can be imported (sqlite:///FILE or a file path), and Optuna "
        "journal files (a file path); copy the study into one first: "
        "optuna.copy_study(from_study_name=..., from_storage=\"",
        storage.substr(0, scheme), "://...\", to_storage=\"sqlite:///study.db\")"));
  }
  return storage;
}

std::string SanitizedStudyName(const std::string& study) {
  std::string out;
  for (char c : absl::AsciiStrToLower(study)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (ok) {
      out += c;
    } else if (out.empty() || out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && out.front() == '-') out.erase(0, 1);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "optuna-study" : out;
}

absl::StatusOr<OptunaImportSummary> ImportOptunaStudy(const OptunaImportOptions& options,
                                                      Clock* clock) {
  if (options.storage.empty()) return absl::InvalidArgumentError("import optuna needs STORAGE");
  OptunaImportOptions resolved = options;
  SEXTANT_ASSIGN_OR_RETURN(resolved.storage, OptunaStoragePath(options.storage));
  std::error_code ec;
  if (!fs::is_regular_file(resolved.storage, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(resolved.storage, ": no such file"));
  }
  SEXTANT_ASSIGN_OR_RETURN(OptunaStudy study, ReadOptunaStorage(resolved.storage, options.study));
  resolved.study = study.name;
  const std::string dir = options.output_dir.empty()
                              ? absl::StrCat("runs/", SanitizedStudyName(resolved.study))
                              : options.output_dir;
  if (ExistsNonEmpty(dir)) {
    return absl::AlreadyExistsError(
        absl::StrCat(dir, " already exists and is not empty; pick another directory with -o"));
  }
  SEXTANT_ASSIGN_OR_RETURN(Plan plan, MakePlan(resolved, std::move(study), dir, clock));
  SEXTANT_RETURN_IF_ERROR(WriteRunDir(plan, dir));
  OptunaImportSummary summary;
  summary.study = resolved.study;
  summary.run_dir = dir;
  summary.first_number = plan.study.trials.front().number;
  summary.last_number = plan.study.trials.back().number;
  summary.experiment_file = (fs::path(dir) / "experiment.yaml").string();
  summary.trials = static_cast<int>(plan.trials.size());
  for (const ImportedTrial& t : plan.trials) summary.completed += t.row.state == v1::COMPLETED;
  summary.max_trials = plan.max_trials;
  for (const ImportedParameter& p : plan.space.parameters) {
    for (const std::string& note : p.notes)
      summary.notes.push_back(absl::StrCat(p.name, ": ", YamlCommentText(note)));
  }
  for (const auto& [name, c] : plan.space.constants.items()) {
    summary.notes.push_back(absl::StrCat(YamlQuoted(name), ": constant ",
                                         YamlCommentText(c["value"].dump()), ", not searched"));
  }
  return summary;
}

int RunOptunaImport(const OptunaImportOptions& options, Clock* clock, std::ostream& out,
                    std::ostream& err) {
  absl::StatusOr<OptunaImportSummary> r = ImportOptunaStudy(options, clock);
  if (!r.ok()) {
    err << "sextant: import optuna: " << r.status().message() << "\n";
    const absl::StatusCode code = r.status().code();
    return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kAlreadyExists
               ? 2
               : 1;
  }
  out << "sextant: imported " << r->trials << " trials (" << r->completed
      << " completed) of the Optuna study " << YamlQuoted(r->study) << " into " << r->run_dir
      << "\n";
  // Optuna counts trials from 0 and Sextant from 1: say which is which before anyone compares
  // "trial 18" across the two.
  out << "  trial numbers: Optuna's trials " << r->first_number << " to " << r->last_number
      << " are Sextant's trials " << r->first_number + 1 << " to " << r->last_number + 1
      << " (Sextant's id = Optuna's number + 1); each keeps its Optuna number as the metric "
      << kOptunaNumberKey << "\n";
  for (const std::string& note : r->notes) out << "  " << note << "\n";
  out << "sextant: " << r->experiment_file
      << " is its experiment (ask/tell mode); its comments say how to continue the search\n"
      << "  room for " << r->max_trials - r->trials << " more trials (search.max_trials "
      << r->max_trials << "; change it with `sextant resume " << r->run_dir
      << " --max-trials N`)\n";
  return 0;
}

}  // namespace sextant
