#include "orchestrator/core/experiment_loader.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "orchestrator/core/federated_trial_params.h"
#include "orchestrator/core/internal/federation_loader.h"
#include "orchestrator/core/internal/loader_support.h"
#include "orchestrator/core/internal/parameters_loader.h"
#include "orchestrator/core/internal/resources_loader.h"
#include "orchestrator/core/trial_command.h"

namespace sextant {
namespace loader_internal {
namespace {

constexpr std::array<absl::string_view, 2> kGoals = {"minimize", "maximize"};

bool IsExperimentName(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// Walks the documents of a YAML text without building nodes, to find where yaml-cpp 0.7 stops
// making progress: on some malformed input (",&a [*a]") its LoadAll yields empty documents
// forever without consuming the offending character.
class DocumentProbe final : public YAML::EventHandler {
 public:
  // True when this document starts where the previous one did (the parser is stuck there).
  bool stuck() const { return stuck_; }
  const YAML::Mark& start() const { return start_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    stuck_ = started_ && mark.pos == start_.pos;
    started_ = true;
    start_ = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  bool started_ = false, stuck_ = false;
  YAML::Mark start_;
};

// Error when yaml-cpp would loop on text (see DocumentProbe); its own exceptions pass through.
std::optional<YAML::Mark> StuckAt(const std::string& text) {
  std::stringstream in(text);
  YAML::Parser parser(in);
  DocumentProbe probe;
  while (parser.HandleNextDocument(probe)) {
    if (probe.stuck()) return probe.start();
  }
  return std::nullopt;
}

// Fills an ExperimentSpec section by section: the root, name, objectives, trial, budget and the
// study's privacy here, the other sections through their own loaders (internal/*_loader.h).
// Not thread-safe; one per load.
class Loader {
 public:
  explicit Loader(const std::string& file)
      : c_(file),
        r_(c_.r),
        spec_(c_.spec),
        kept_(c_.kept),
        file_(c_.file),
        parameters_(c_),
        resources_(c_) {}

  LoadResult Run(const std::string& yaml);

 private:
  void LoadRoot(const Field& root);
  void LoadName(const Section& root);
  void LoadObjective(const Section& root);
  void LoadOneObjective(const Field& f, v1::Objective* objective, bool with_reference);
  void LoadObjectives(const Field& f);
  void LoadConstraints(const Field& f);
  void CheckObjectivesAgainstSearch(const Section& root);
  void LoadAskTellTrial(const Field& f, v1::TrialSpec* trial);
  void CheckAskTell(const Section& root);
  void LoadTrial(const Section& root);
  void LoadCommand(const Field& f, v1::TrialSpec* trial);
  void LoadBuiltin(const Field& f, v1::BuiltinTrainer* builtin);
  void LoadStringMap(const Field& f, bool env_names,
                     google::protobuf::Map<std::string, std::string>* out);
  void CheckReferences(const Field& f, const std::string& text);
  void LoadBudget(const Section& root);
  void LoadStudyPrivacy(const Field& f);
  void CheckStudyPrivacy();

  LoadContext c_;
  Reader& r_;
  v1::ExperimentSpec& spec_;
  KeptFields& kept_;
  const std::string& file_;
  ParametersLoader parameters_;
  ResourcesLoader resources_;
  // Keys checked once the whole file is loaded (the study's privacy).
  std::optional<Field> max_epsilon_field_, privacy_field_, selection_field_;
};

LoadResult Loader::Run(const std::string& yaml) {
  LoadResult result;
  try {
    if (std::optional<YAML::Mark> at = StuckAt(yaml)) {
      r_.Error({at->line + 1, at->column + 1}, "",
               "invalid YAML: the parser cannot get past this point");
      result.errors = std::move(r_.errors());
      return result;
    }
    std::vector<YAML::Node> docs = YAML::LoadAll(yaml);
    if (docs.empty() || docs[0].IsNull()) {
      r_.Error({1, 1}, "", "the experiment file is empty");
    } else {
      for (size_t i = 1; i < docs.size(); ++i) {
        if (!docs[i].IsNull()) {
          r_.Error(PosOf(docs[i]), "", "only one YAML document is allowed per file");
        }
      }
      LoadRoot(Field("", YAML::Node(), docs[0]));
    }
  } catch (const YAML::DeepRecursion& e) {
    r_.Error({e.mark.line + 1, e.mark.column + 1}, "", "invalid YAML: nested too deeply");
  } catch (const YAML::Exception& e) {
    // ParserException carries the parser's position; others may not.
    r_.Error({e.mark.line + 1, e.mark.column + 1}, "", absl::StrCat("invalid YAML: ", e.msg));
  } catch (const std::exception& e) {
    r_.Error({}, "", absl::StrCat("internal error while loading: ", e.what()));
  } catch (...) {
    r_.Error({}, "", "internal error while loading: unknown exception");
  }
  result.errors = std::move(r_.errors());
  std::stable_sort(result.errors.begin(), result.errors.end(),
                   [](const LoadError& a, const LoadError& b) {
                     return std::tie(a.line, a.col) < std::tie(b.line, b.col);
                   });
  if (result.ok()) result.spec = std::move(spec_);
  return result;
}

void Loader::LoadRoot(const Field& root) {
  Section s(r_, root,
            {"name", "objective", "objectives", "constraints", "parameters", "search", "trial",
             "budget", "resources", "federation", "simulate", "privacy"});
  if (!s.ok()) return;
  spec_.set_source_path(file_);
  LoadName(s);
  LoadObjective(s);
  // Plain federated training (no search) has nothing to tune.
  parameters_.LoadParameters(s, s.Find("federation") != nullptr && s.Find("search") == nullptr);
  parameters_.LoadSearch(s);
  LoadTrial(s);
  LoadBudget(s);
  resources_.LoadResources(s);
  if (const Field* f = s.Find("federation")) FederationLoader(c_).LoadFederation(*f);
  if (const Field* f = s.Find("simulate")) resources_.LoadSimulate(*f);
  if (const Field* f = s.Find("privacy")) LoadStudyPrivacy(*f);
  CheckStudyPrivacy();
  resources_.CheckPoolsAgainstCatalog(s);
  CheckObjectivesAgainstSearch(s);
  if (spec_.search().mode() == v1::Search::ASK_TELL) CheckAskTell(s);
}

// An ask/tell run launches nothing: no instances, no federated rounds.
void Loader::CheckAskTell(const Section& root) {
  if (const Field* f = root.Find("federation")) {
    r_.KeyError(*f,
                "cannot be combined with search.mode: ask_tell (a federated run launches "
                "its clients)");
  }
  const Field* resources = root.Find("resources");
  if (resources == nullptr || !resources->value.IsMap()) return;
  for (const auto& kv : resources->value) {
    if (kv.first.IsScalar() && kv.first.Scalar() == "pools") {
      Field pools(Join(resources->path, "pools"), kv.first, kv.second);
      r_.KeyError(pools,
                  "search.mode is ask_tell: clients run the trials, so no instances are "
                  "launched; remove resources.pools");
    }
  }
}

void Loader::LoadName(const Section& root) {
  const Field* f = root.Require("name");
  if (f == nullptr) return;
  std::optional<std::string> name = r_.String(*f);
  if (!name) return;
  if (!IsExperimentName(*name)) {
    r_.ValueError(
        *f, absl::StrCat("invalid name '", *name, "'; use lowercase letters, digits, '_' and '-'"));
  } else if (name->size() > 64) {
    r_.ValueError(*f, absl::StrCat("too long (", name->size(), " characters; at most 64)"));
  }
  spec_.set_name(*name);
}

void Loader::LoadObjective(const Section& root) {
  const Field* several = root.Find("objectives");
  const Field* one = root.Find("objective");
  if (several != nullptr && one != nullptr) {
    r_.KeyError(*several, "give either objective (one) or objectives (2 to 4), not both");
    return;
  }
  if (several != nullptr) {
    LoadObjectives(*several);
  } else if (const Field* f = root.Require("objective")) {
    LoadOneObjective(*f, spec_.mutable_objective(), /*with_reference=*/false);
  }
  if (const Field* f = root.Find("constraints")) LoadConstraints(*f);
}

void Loader::LoadOneObjective(const Field& f, v1::Objective* objective, bool with_reference) {
  Section s(r_, f,
            with_reference ? std::vector<absl::string_view>{"metric", "goal", "reference"}
                           : std::vector<absl::string_view>{"metric", "goal", "target"});
  objective->set_goal(v1::Objective::MINIMIZE);
  if (!s.ok()) return;
  if (const Field* metric = s.Require("metric")) {
    if (auto v = r_.NonEmptyString(*metric)) objective->set_metric(*v);
  }
  IfPresent<size_t>(
      s, "goal",
      [&](const Field& g) -> std::optional<size_t> {
        // British spellings are accepted but not listed, so the error names each goal once.
        if (g.value.IsScalar() && g.value.Scalar() == "minimise") return 0;
        if (g.value.IsScalar() && g.value.Scalar() == "maximise") return 1;
        return r_.Choice(g, kGoals);
      },
      [&](size_t i) {
        objective->set_goal(i == 0 ? v1::Objective::MINIMIZE : v1::Objective::MAXIMIZE);
      });
  IfPresent<double>(
      s, "target", [&](const Field& t) { return r_.Number(t); },
      [&](double v) { objective->set_target(v); });
  IfPresent<double>(
      s, "reference", [&](const Field& t) { return r_.Number(t); },
      [&](double v) { objective->set_reference(v); });
}

void Loader::LoadObjectives(const Field& f) {
  std::vector<Field> entries = r_.Elements(f);
  if (!f.value.IsSequence()) return;
  if (entries.size() < 2 || entries.size() > 4) {
    r_.ValueError(f, absl::StrCat("needs 2 to 4 entries, got ", entries.size(),
                                  entries.size() == 1 ? " (for one, use objective:)" : ""));
    return;
  }
  std::map<std::string, std::string> seen;  // metric -> the entry's path
  for (const Field& e : entries) {
    v1::Objective* objective = spec_.add_objectives();
    LoadOneObjective(e, objective, /*with_reference=*/true);
    if (objective->metric().empty()) continue;
    auto [it, fresh] = seen.emplace(objective->metric(), e.path);
    if (!fresh) {
      r_.ValueError(e, absl::StrCat("metric '", objective->metric(), "' is already an objective (",
                                    it->second, ")"));
    }
  }
}

void Loader::LoadConstraints(const Field& f) {
  std::vector<Field> entries = r_.Elements(f);
  if (f.value.IsSequence() && entries.empty()) r_.ValueError(f, "empty list; leave the key out");
  for (const Field& e : entries) {
    v1::Constraint* c = spec_.add_constraints();
    Section s(r_, e, {"metric", "max", "min"});
    if (!s.ok()) continue;
    if (const Field* metric = s.Require("metric")) {
      if (auto v = r_.NonEmptyString(*metric)) c->set_metric(*v);
    }
    IfPresent<double>(
        s, "max", [&](const Field& x) { return r_.Number(x); }, [&](double v) { c->set_max(v); });
    IfPresent<double>(
        s, "min", [&](const Field& x) { return r_.Number(x); }, [&](double v) { c->set_min(v); });
    if (s.Find("max") == nullptr && s.Find("min") == nullptr) {
      r_.ValueError(e, "needs max or min (a bound the metric must keep)");
    } else if (c->has_max() && c->has_min() && !(c->min() <= c->max())) {
      r_.ValueError(*s.Find("min"), "must not exceed max");
    }
  }
}

// Checks what depends on both the objectives and the search or resources blocks.
void Loader::CheckObjectivesAgainstSearch(const Section& root) {
  const int objectives = spec_.objectives_size();
  const v1::Search& search = spec_.search();
  const Field* search_field = root.Find("search");
  const Field* objectives_field = root.Find("objectives");
  // The search block's entry `key`, already checked by LoadSearch (null when absent).
  std::vector<std::unique_ptr<Field>> found;
  auto search_key = [&](absl::string_view key) -> const Field* {
    if (search_field == nullptr || !search_field->value.IsMap()) return nullptr;
    for (const auto& kv : search_field->value) {
      if (kv.first.IsScalar() && kv.first.Scalar() == key) {
        found.push_back(std::make_unique<Field>(Join(search_field->path, std::string(key)),
                                                kv.first, kv.second));
        return found.back().get();
      }
    }
    return nullptr;
  };
  if (search.sampler() == v1::Search::NSGA2 && objectives == 0) {
    if (const Field* f = search_key("sampler")) {
      r_.ValueError(*f,
                    "nsga2 needs several objectives (objectives:); for one, use bayesian or tpe");
    }
  }
  if (search.cost_aware()) {
    const Field* f = search_key("cost_aware");
    if (objectives > 0 && f != nullptr) {
      r_.ValueError(*f, "cost_aware is for one objective; with objectives:, make cost one of them");
    } else if (search.sampler() != v1::Search::BAYESIAN && f != nullptr) {
      r_.ValueError(*f, "cost_aware needs sampler: bayesian");
    }
  }
  if (objectives > 0 && search.scheduler() == v1::Search::MEDIAN) {
    if (const Field* f = search_key("scheduler")) {
      r_.ValueError(*f,
                    "median stopping compares one value; with objectives:, use asha, hyperband "
                    "or bohb (they rank by non-dominated rank and crowding distance)");
    }
  }
  const v1::Resources& res = spec_.resources();
  const bool unbilled = res.provider() == "local" && res.pools_size() == 0;
  if (unbilled && objectives_field != nullptr && spec_.federation().regions_size() == 0) {
    for (int i = 0; i < objectives; ++i) {
      if (spec_.objectives(i).metric() == "cost") {
        r_.ValueError(*objectives_field,
                      absl::StrCat("objectives[", i,
                                   "]: cost is always 0 under the local provider "
                                   "without pools (nothing is billed); add priced pools under "
                                   "resources:, or try it with sextant simulate"));
      }
    }
  }
}

// A plain federated run on a model of the user's own (federation.model) runs no built-in trainer
// and no trial command: its `trial` block is optional.
bool OwnModelRun(const Section& root) {
  const Field* fed = root.Find("federation");
  return fed != nullptr && root.Find("search") == nullptr && fed->value.IsMap() &&
         fed->value["model"];
}

void Loader::LoadTrial(const Section& root) {
  const bool ask_tell = spec_.search().mode() == v1::Search::ASK_TELL;
  const Field* f = ask_tell || OwnModelRun(root) ? root.Find("trial") : root.Require("trial");
  if (f == nullptr) return;
  v1::TrialSpec* trial = spec_.mutable_trial();
  trial->set_working_dir(WorkingDir(file_, ""));
  if (ask_tell) {
    LoadAskTellTrial(*f, trial);
    return;
  }
  Section s(r_, *f, {"command", "timeout", "env", "working_dir", "max_restarts", "builtin"});
  if (!s.ok()) return;
  const Field* command = s.Find("command");
  const Field* builtin = s.Find("builtin");
  if (command == nullptr && builtin == nullptr) {
    r_.Error(KeyPos(*f), Join(f->path, "command"), "required key is missing (or give builtin)");
  }
  if (command != nullptr && builtin != nullptr) {
    r_.KeyError(*builtin, "cannot be combined with trial.command; give one of them");
  }
  if (command != nullptr) LoadCommand(*command, trial);
  if (builtin != nullptr) LoadBuiltin(*builtin, trial->mutable_builtin());
  IfPresent<double>(
      s, "timeout", [&](const Field& x) { return r_.Duration(x); },
      [&](double v) { trial->set_timeout_seconds(v); });
  if (const Field* env = s.Find("env")) LoadStringMap(*env, true, trial->mutable_env());
  IfPresent<std::string>(
      s, "working_dir", [&](const Field& x) { return r_.NonEmptyString(x); },
      [&](const std::string& v) { trial->set_working_dir(WorkingDir(file_, v)); });
  IfPresent<int64_t>(
      s, "max_restarts", [&](const Field& x) { return r_.Integer(x, 0, kInt32Max); },
      [&](int64_t v) { trial->set_max_restarts(v); });
}

// Clients run ask/tell trials themselves: of the trial block only max_restarts (re-asks after a
// FAILED tell) means anything.
void Loader::LoadAskTellTrial(const Field& f, v1::TrialSpec* trial) {
  for (const Field& e : r_.Entries(f)) {
    const std::string& key = e.key.Scalar();
    if (key == "max_restarts") {
      if (auto v = r_.Integer(e, 0, kInt32Max)) trial->set_max_restarts(*v);
    } else {
      r_.KeyError(e, absl::StrCat("search.mode is ask_tell: clients run the trials, so trial.", key,
                                  " is not used; remove it (or use mode: commands)"));
    }
  }
}

void Loader::LoadCommand(const Field& f, v1::TrialSpec* trial) {
  std::vector<Field> args = r_.Elements(f);
  if (f.value.IsSequence() && args.empty()) r_.ValueError(f, "must not be empty");
  for (const Field& arg : args) {
    std::optional<std::string> v = r_.String(arg);
    if (!v) continue;
    CheckReferences(arg, *v);
    trial->add_command(*v);
  }
}

void Loader::LoadBuiltin(const Field& f, v1::BuiltinTrainer* builtin) {
  Section s(r_, f, {"model", "dataset", "epochs", "gpus", "args"});
  if (!s.ok()) return;
  auto one_of = [&](std::set<std::string> allowed) {
    return [this, allowed](const Field& x) -> std::optional<std::string> {
      std::optional<std::string> v = r_.NonEmptyString(x);
      if (v && !allowed.contains(*v)) {
        r_.ValueError(x, absl::StrCat("'", *v, "' is not one of: ", absl::StrJoin(allowed, ", ")));
        return std::nullopt;
      }
      return v;
    };
  };
  IfPresent<std::string>(s, "model", one_of({"mlp", "cnn"}),
                         [&](const std::string& v) { builtin->set_model(v); });
  IfPresent<std::string>(s, "dataset", one_of({"fashion-mnist", "synthetic"}),
                         [&](const std::string& v) { builtin->set_dataset(v); });
  IfPresent<int64_t>(
      s, "epochs", [&](const Field& x) { return r_.Integer(x, 1, kInt32Max); },
      [&](int64_t v) { builtin->set_epochs(v); });
  IfPresent<int64_t>(
      s, "gpus", [&](const Field& x) { return r_.Integer(x, 0, kInt32Max); },
      [&](int64_t v) { builtin->set_gpus(v); });
  if (const Field* args = s.Find("args")) {
    LoadStringMap(*args, false, builtin->mutable_args());
    for (const Field& e : r_.Entries(*args)) {
      if (!kBuiltinTrainerOptions.contains(e.key.Scalar())) {
        r_.KeyError(e, absl::StrCat("not an option of the built-in trainer; use one of: ",
                                    absl::StrJoin(kBuiltinTrainerOptions, ", ")));
      }
    }
  }
}

void Loader::LoadStringMap(const Field& f, bool env_names,
                           google::protobuf::Map<std::string, std::string>* out) {
  for (const Field& e : r_.Entries(f)) {
    if (env_names && !IsIdentifier(e.key.Scalar())) {
      r_.KeyError(e, "invalid environment variable name; use letters, digits and '_'");
    }
    std::optional<std::string> v = r_.String(e);
    if (!v) continue;
    CheckReferences(e, *v);
    (*out)[e.key.Scalar()] = *v;
  }
}

void Loader::CheckReferences(const Field& f, const std::string& text) {
  for (size_t pos = text.find("${"); pos != std::string::npos; pos = text.find("${", pos)) {
    const size_t end = text.find('}', pos + 2);
    if (end == std::string::npos) {
      r_.ValueError(f, "unterminated '${' (write ${name})");
      return;
    }
    const std::string name = text.substr(pos + 2, end - pos - 2);
    const auto& params = spec_.parameters();
    const bool found = std::any_of(params.begin(), params.end(),
                                   [&](const v1::Parameter& p) { return p.name() == name; });
    if (!found && absl::StartsWith(name, "SEXTANT_")) {
      // ${...} is substituted by Sextant before the command runs, with parameters only; the
      // trial's own variables are set in its environment, where only a shell expands them.
      r_.ValueError(
          f, absl::StrCat("'${", name,
                          "}' names no parameter (${...} takes parameters only). Sextant sets "
                          "SEXTANT_TRIAL_ID, SEXTANT_ATTEMPT, SEXTANT_EXPERIMENT, "
                          "SEXTANT_CHECKPOINT_DIR, SEXTANT_PARAMS and SEXTANT_PARAM_<NAME> in the "
                          "trial's environment: read them there, in a command through a shell, "
                          "e.g. [sh, -c, 'python3 train.py --tag $",
                          name, "']"));
    } else if (!found) {
      std::vector<std::string> declared;
      for (const v1::Parameter& p : params) declared.push_back(p.name());
      r_.ValueError(f,
                    absl::StrCat("'${", name, "}' names no parameter (declared: ",
                                 declared.empty() ? "none" : absl::StrJoin(declared, ", "), ")"));
    }
    pos = end + 1;
  }
}
void Loader::LoadBudget(const Section& root) {
  v1::Budget* budget = spec_.mutable_budget();
  budget->set_currency("USD");
  const Field* f = root.Find("budget");
  if (f == nullptr) return;
  Section s(r_, *f, {"max_cost", "max_wall_time", "currency", "max_epsilon"});
  if (!s.ok()) return;
  if (const Field* mc = s.Find("max_cost")) kept_.max_cost.emplace(*mc);
  if (const Field* me = s.Find("max_epsilon")) max_epsilon_field_.emplace(*me);
  IfPresent<double>(
      s, "max_epsilon", [&](const Field& x) { return r_.NumberAbove(x, 0, true); },
      [&](double v) { budget->set_max_epsilon(v); });
  IfPresent<double>(
      s, "max_cost", [&](const Field& x) { return r_.NumberAbove(x, 0, true); },
      [&](double v) { budget->set_max_cost(v); });
  IfPresent<double>(
      s, "max_wall_time", [&](const Field& x) { return r_.Duration(x); },
      [&](double v) { budget->set_max_wall_time_seconds(v); });
  IfPresent<std::string>(
      s, "currency", [&](const Field& x) { return r_.NonEmptyString(x); },
      [&](const std::string& v) { budget->set_currency(v); });
}

constexpr std::array<absl::string_view, 2> kSelections = {"composition", "random_stopping"};
constexpr std::array<absl::string_view, 2> kStoppingDistributions = {"truncated_negative_binomial",
                                                                     "poisson"};

void Loader::LoadStudyPrivacy(const Field& f) {
  privacy_field_.emplace(f);
  v1::StudyPrivacy* p = spec_.mutable_privacy();
  p->set_selection("composition");
  Section s(r_, f, {"selection", "distribution", "mean_trials", "eta"});
  if (!s.ok()) return;
  if (const Field* x = s.Find("selection")) {
    selection_field_.emplace(*x);
    if (std::optional<size_t> i = r_.Choice(*x, kSelections)) {
      p->set_selection(std::string(kSelections[*i]));
    }
  }
  const bool stopping = p->selection() == "random_stopping";
  for (const char* key : {"distribution", "mean_trials", "eta"}) {
    if (const Field* x = s.Find(key); x != nullptr && !stopping) {
      r_.KeyError(*x, "only with selection: random_stopping (composition draws nothing)");
    }
  }
  if (!stopping) return;
  p->set_distribution("truncated_negative_binomial");
  p->set_mean_trials(10);
  p->set_eta(1);
  IfPresent<size_t>(
      s, "distribution", [&](const Field& x) { return r_.Choice(x, kStoppingDistributions); },
      [&](size_t i) { p->set_distribution(std::string(kStoppingDistributions[i])); });
  if (const Field* x = s.Find("mean_trials")) {
    std::optional<double> v = r_.Number(*x);
    if (v && !(*v > 1 && *v <= 1e6)) {
      r_.ValueError(*x, "the expected number of trials must be above 1 (and at most 1e6)");
    } else if (v) {
      p->set_mean_trials(*v);
    }
  }
  if (const Field* x = s.Find("eta")) {
    std::optional<double> v = r_.Number(*x);
    if (p->distribution() == "poisson") {
      r_.KeyError(*x, "only with distribution: truncated_negative_binomial (its shape)");
    } else if (v && !(*v > -1 && *v <= 1e3)) {
      r_.ValueError(*x, "the shape must be above -1 (1: geometric, 0: logarithmic)");
    } else if (v) {
      p->set_eta(*v);
    }
  }
}

// The study's privacy (budget.max_epsilon, privacy:) holds only for a federated search with DP,
// random stopping only where no configuration depends on an earlier result, and rounds as a
// fidelity only for federated trials.
void Loader::CheckStudyPrivacy() {
  // A federated search tunes the federation block: every parameter must be one of its keys.
  if (spec_.has_federation()) {
    for (const Field& p : kept_.parameters) {
      const std::string& name = p.key.Scalar();
      if (!IsFederationHyperparameter(name)) {
        r_.KeyError(p, absl::StrCat("a federated search tunes the federation block: '", name,
                                    "' is not one of its hyperparameters (",
                                    FederationHyperparameterNames(), ")"));
      } else if (name == "clip_norm" && !spec_.federation().has_dp()) {
        r_.KeyError(p, "clip_norm tunes federation.dp.clip_norm: add federation.dp");
      }
    }
  }
  const bool federated = spec_.has_federation();
  const bool search = federated && spec_.parameters_size() > 0;
  const bool dp = federated && spec_.federation().has_dp();
  auto why_not = [&](const char* what) -> std::string {
    if (!federated) {
      return absl::StrCat(what, " needs a federated search with differential privacy (a ",
                          "federation: block with dp:, and parameters: to tune)");
    }
    if (!dp) return absl::StrCat(what, " needs differential privacy: add federation.dp");
    if (!search) {
      return absl::StrCat(what, " is the privacy of a tuning study (parameters: to tune); a ",
                          "single federated run stops at federation.dp.target_epsilon");
    }
    return "";
  };
  if (max_epsilon_field_) {
    if (std::string why = why_not("a cap on the study's epsilon"); !why.empty()) {
      r_.ValueError(*max_epsilon_field_, why);
    }
  }
  if (privacy_field_) {
    if (std::string why = why_not("the study's privacy account"); !why.empty()) {
      r_.KeyError(*privacy_field_, why);
    }
  }
  if (spec_.privacy().selection() == "random_stopping" && selection_field_) {
    const v1::Search& s = spec_.search();
    const bool fixed = s.sampler() == v1::Search::RANDOM || s.sampler() == v1::Search::GRID ||
                       s.sampler() == v1::Search::SOBOL;
    const std::string rule =
        "random_stopping holds only when no configuration depends on an earlier trial's result "
        "(sampler random, sobol or grid, no scheduler, no warm start)";
    if (!fixed) {
      const Field& at = kept_.sampler ? *kept_.sampler : *selection_field_;
      r_.ValueError(
          at, absl::StrCat(rule, "; sampler ", kept_.sampler ? kept_.sampler->value.Scalar() : "",
                           " adapts to the results"));
    }
    if (s.scheduler() != v1::Search::NONE && kept_.scheduler) {
      r_.ValueError(*kept_.scheduler, absl::StrCat(rule, "; a scheduler stops trials by them"));
    }
    if (kept_.warm_start) {
      r_.KeyError(*kept_.warm_start, absl::StrCat(rule, "; a warm start seeds the sampler"));
    }
    if (spec_.objectives_size() > 1) {
      r_.ValueError(*selection_field_,
                    "random_stopping releases the one best trial; with several objectives there "
                    "is a front, not one best (use composition)");
    }
    if (kept_.max_trials) {
      r_.KeyError(*kept_.max_trials,
                  "random_stopping draws the number of trials (privacy.mean_trials on average); "
                  "a fixed max_trials would void its guarantee");
    }
  }
  if (kept_.fidelity_name && spec_.search().fidelity().name() == "rounds") {
    if (!federated) {
      r_.ValueError(*kept_.fidelity_name,
                    "rounds is the fidelity of federated trials; it needs a federation: block");
    } else if (kept_.fidelity_max &&
               spec_.search().fidelity().max() > spec_.federation().rounds()) {
      r_.ValueError(*kept_.fidelity_max, absl::StrCat("a rung of ", spec_.search().fidelity().max(),
                                                      " rounds is above federation.rounds (",
                                                      spec_.federation().rounds(), ")"));
    }
  }
}

}  // namespace
}  // namespace loader_internal

std::string LoadError::ToString() const {
  return absl::StrCat(file, ":", line, ":", col, ": ", message);
}

LoadResult LoadExperimentFromString(const std::string& yaml, const std::string& file) {
  return loader_internal::Loader(file).Run(yaml);
}

LoadResult LoadExperimentFile(const std::string& path) {
  auto fail = [&](std::string message) {
    LoadResult result;
    result.errors.push_back({path, 0, 0, std::move(message)});
    return result;
  };
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return fail(absl::StrCat("cannot read: ", std::generic_category().message(errno)));
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    text.append(buf, n);
    if (static_cast<int64_t>(text.size()) > kMaxExperimentFileBytes) {
      std::fclose(f);
      return fail(absl::StrCat("cannot read: larger than ", kMaxExperimentFileBytes, " bytes"));
    }
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return fail(absl::StrCat("cannot read: ", std::generic_category().message(err)));
  return LoadExperimentFromString(text, path);
}

SearchSpace ToSearchSpace(const v1::ExperimentSpec& spec) {
  SearchSpace space;
  for (const v1::Parameter& p : spec.parameters()) {
    ParamSpec ps;
    ps.name = p.name();
    switch (p.type()) {
      case v1::Parameter::INT:
        ps.kind = ParamSpec::Kind::kInt;
        break;
      case v1::Parameter::CATEGORICAL:
        ps.kind = ParamSpec::Kind::kCategorical;
        break;
      default:
        ps.kind = ParamSpec::Kind::kFloat;
        break;
    }
    ps.min = p.min();
    ps.max = p.max();
    ps.log = p.log();
    ps.values.assign(p.values().begin(), p.values().end());
    ps.grid_points = p.grid_points();
    ps.step = p.step();
    ps.when.insert(p.when().begin(), p.when().end());
    space.params.push_back(std::move(ps));
  }
  return space;
}

}  // namespace sextant
