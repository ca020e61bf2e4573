// `sextant import optuna` against studies that Debian's python3-optuna writes at test time.
#include "orchestrator/import/optuna_import.h"

#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/warm_start.h"
#include "orchestrator/import/optuna_storage.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

namespace fs = std::filesystem;
using ::sextant::testing::MakeTempDir;
using ::sextant::testing::ReadFile;
using ::sextant::testing::RunProcess;
using ::sextant::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

// Every script starts with this. record(study) keeps what Optuna itself reports about each
// trial: the ground truth the import is checked against.
constexpr const char* kPrelude = R"py(
import json, sys
import optuna
optuna.logging.set_verbosity(optuna.logging.ERROR)
DIR = sys.argv[1]
truth = {}
def record(study):
    trials = []
    for t in study.get_trials(deepcopy=False):
        trials.append({"number": t.number, "state": t.state.name, "params": t.params,
                       "values": t.values, "user_attrs": t.user_attrs,
                       "intermediate": [[k, v] for k, v in sorted(t.intermediate_values.items())]})
    r = {"directions": [d.name for d in study.directions], "trials": trials}
    if len(study.directions) == 1:
        b = study.best_trial
        r["best"] = {"number": b.number, "value": b.value}
    truth[study.study_name] = r
)py";

constexpr const char* kEpilogue = R"py(
json.dump(truth, open(DIR + "/truth.json", "w"))
)py";

// One objective: every distribution kind (log and step included), a parameter that only
// act == "relu" suggests, and user attributes. Trials 0 and 3 are enqueued with relu.
constexpr const char* kBasicStudy = R"py(
s = optuna.create_study(storage="sqlite:///" + DIR + "/study.db", study_name="Basic Study",
                        direction="minimize", sampler=optuna.samplers.RandomSampler(seed=3))
def basic(t):
    x = t.suggest_float("x", -5, 5)
    t.suggest_float("lr", 1e-5, 1e-1, log=True)
    n = t.suggest_int("n", 1, 9, step=2)
    m = t.suggest_int("m", 1, 64, log=True)
    f = t.suggest_float("f", 0, 1, step=0.25)
    act = t.suggest_categorical("act", ["relu", "tanh", None, 3, 1.5, True])
    slope = t.suggest_float("slope", 0.01, 0.5) if act == "relu" else 0
    t.set_user_attr("accuracy", 0.5 + 0.01 * t.number)
    t.set_user_attr("note", "trial %d" % t.number)
    t.set_user_attr("shape", [n, m])
    return x * x + f + slope
for cfg in [{"act": "relu"}, {"act": "tanh"}, {"act": None}, {"act": "relu"}]:
    s.enqueue_trial(cfg)
s.optimize(basic, n_trials=8)
record(s)
optuna.create_study(storage="sqlite:///" + DIR + "/study.db", study_name="other")
)py";

// Pruning with intermediate values, a failure, a trial left RUNNING and one left WAITING.
constexpr const char* kPrunedStudy = R"py(
s = optuna.create_study(storage="sqlite:///" + DIR + "/pruned.db", study_name="pruned",
                        direction="maximize", sampler=optuna.samplers.RandomSampler(seed=5),
                        pruner=optuna.pruners.ThresholdPruner(lower=0.5))
def curve(t):
    q = t.suggest_float("q", 0, 1)
    for step in range(1, 6):
        t.report(q * step / 5 + 0.4, step)
        if t.should_prune():
            raise optuna.TrialPruned()
    if t.number == 7:
        raise RuntimeError("diverged")
    return q + 0.4
s.optimize(curve, n_trials=10, catch=(RuntimeError,))
s.ask().suggest_float("q", 0, 1)
s.enqueue_trial({"q": 0.25})
record(s)
)py";

constexpr const char* kTwoObjectives = R"py(
s = optuna.create_study(storage="sqlite:///" + DIR + "/mo.db", study_name="mo",
                        directions=["minimize", "maximize"],
                        sampler=optuna.samplers.RandomSampler(seed=7))
def two(t):
    a = t.suggest_float("a", 0, 1)
    b = t.suggest_int("b", 1, 4)
    return a * b, (1 - a) * b
s.optimize(two, n_trials=6)
record(s)
)py";

// Define-by-run: each model kind has its own parameters, leaf exists only at depth 3, and
// noise is suggested on every third trial whatever the kind.
constexpr const char* kConditionalStudy = R"py(
s = optuna.create_study(storage="sqlite:///" + DIR + "/cond.db", study_name="cond",
                        sampler=optuna.samplers.RandomSampler(seed=11))
def cond(t):
    kind = t.suggest_categorical("kind", ["linear", "tree"])
    if kind == "tree":
        v = t.suggest_int("depth", 1, 3)
        if v == 3:
            t.suggest_float("leaf", 0.1, 1.0)
    else:
        v = t.suggest_float("alpha", 1e-3, 1.0, log=True)
    if t.number % 3 == 0:
        v += t.suggest_float("noise", 0, 1)
    return v
for cfg in [{"kind": "tree", "depth": 3}, {"kind": "tree", "depth": 1}, {"kind": "linear"}]:
    s.enqueue_trial(cfg)
s.optimize(cond, n_trials=12)
record(s)
)py";

constexpr const char* kTinyStudy = R"py(
for name in ["tiny", "second one"]:
    s = optuna.create_study(storage="sqlite:///" + DIR + "/tiny.db", study_name=name)
    s.optimize(lambda t: t.suggest_float("x", 0, 1) + t.suggest_int("k", 1, 3), n_trials=3)
    record(s)
)py";

// Writes the studies of `body` into dir with python3-optuna; returns what record() kept.
Json MakeStudies(const std::string& dir, const std::string& body) {
  const std::string script = dir + "/make_studies.py";
  WriteFile(script, std::string(kPrelude) + body + kEpilogue);
  testing::CommandOutput r = RunProcess({"/usr/bin/python3", script, dir}, 300);
  EXPECT_EQ(r.exit_code, 0) << "python3-optuna (scripts/install-deps --test) failed:\n" << r.err;
  Json truth = Json::parse(ReadFile(dir + "/truth.json"), nullptr, false);
  EXPECT_TRUE(truth.is_object());
  return truth;
}

void Sql(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK) << error;
  sqlite3_free(error);
  sqlite3_close(db);
}

// A copy of db beside it, edited by sql.
std::string EditedCopy(const std::string& db, const std::string& sql) {
  static int n = 0;
  const std::string copy = absl::StrCat(db, ".edited-", ++n);
  fs::copy_file(db, copy, fs::copy_options::overwrite_existing);
  Sql(copy, sql);
  return copy;
}

// The run directory as `sextant results --format json` shows it.
Json Results(const std::string& dir) {
  testing::CommandOutput r = RunProcess({kSextant, "results", dir, "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return Json::parse(r.out, nullptr, false);
}

absl::StatusOr<OptunaImportSummary> Import(const std::string& storage, const std::string& study,
                                           const std::string& dir,
                                           std::vector<std::string> metrics = {},
                                           int max_trials = 0) {
  OptunaImportOptions options;
  options.storage = storage;
  options.study = study;
  options.output_dir = dir;
  options.metrics = std::move(metrics);
  options.max_trials = max_trials;
  FakeClock clock(absl::FromUnixSeconds(1'700'000'000));
  return ImportOptunaStudy(options, &clock);
}

v1::ExperimentSpec StoredSpec(const std::string& dir) {
  auto store = Store::Open(RunDir::DbPath(dir), false, true);
  EXPECT_TRUE(store.ok()) << store.status();
  v1::ExperimentSpec spec;
  auto bytes = (*store)->GetMeta("spec");
  EXPECT_TRUE(bytes.ok() && *bytes && spec.ParseFromString(**bytes));
  return spec;
}

const v1::Parameter* FindParameter(const v1::ExperimentSpec& spec, const std::string& name) {
  for (const v1::Parameter& p : spec.parameters()) {
    if (p.name() == name) return &p;
  }
  ADD_FAILURE() << "no parameter " << name;
  static const v1::Parameter kNone;
  return &kNone;
}

// Nothing of an import that failed is left in parent: no target, no temporary sibling.
void ExpectNothingWritten(const std::string& parent, const std::string& target) {
  EXPECT_FALSE(fs::exists(target)) << target;
  for (const auto& entry : fs::directory_iterator(parent)) {
    EXPECT_THAT(entry.path().filename().string(), ::testing::Not(HasSubstr(".import-")));
  }
}

TEST(OptunaImportTest, ImportsOneObjectiveWithItsValuesParamsAndBest) {
  const std::string tmp = MakeTempDir("optuna-basic");
  const Json truth = MakeStudies(tmp, kBasicStudy)["Basic Study"];
  const std::string dir = tmp + "/imported";
  auto summary = Import(tmp + "/study.db", "Basic Study", dir);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->trials, 8);
  EXPECT_EQ(summary->completed, 8);

  const Json results = Results(dir);
  EXPECT_EQ(results["experiment"], "basic-study");
  EXPECT_EQ(results["state"], "COMPLETED");
  EXPECT_EQ(results["objective"], Json({{"metric", "value"}, {"goal", "minimize"}}));
  ASSERT_EQ(results["trials"].size(), truth["trials"].size());
  for (size_t i = 0; i < truth["trials"].size(); ++i) {
    const Json& want = truth["trials"][i];
    const Json& got = results["trials"][i];
    SCOPED_TRACE(absl::StrCat("trial ", want["number"].get<int>()));
    EXPECT_EQ(got["id"], want["number"].get<int>() + 1);
    EXPECT_EQ(got["state"], "COMPLETED");
    EXPECT_DOUBLE_EQ(got["value"].get<double>(), want["values"][0].get<double>());
    const Json& p = want["params"];
    EXPECT_DOUBLE_EQ(got["params"]["x"].get<double>(), p["x"].get<double>());
    EXPECT_DOUBLE_EQ(got["params"]["lr"].get<double>(), p["lr"].get<double>());
    EXPECT_DOUBLE_EQ(got["params"]["f"].get<double>(), p["f"].get<double>());
    EXPECT_TRUE(got["params"]["n"].is_number_integer());
    EXPECT_EQ(got["params"]["n"], p["n"]);
    EXPECT_EQ(got["params"]["m"], p["m"]);
    // Categorical choices are Python's str() of Optuna's: None, 3, 1.5, True as text.
    const Json& act = p["act"];
    const std::string want_act = act.is_null()      ? "None"
                                 : act.is_boolean() ? "True"
                                 : act.is_string()  ? act.get<std::string>()
                                                    : act.dump();
    EXPECT_EQ(got["params"]["act"], want_act);
    EXPECT_EQ(got["params"].contains("slope"), p.contains("slope"));
    // User attributes are metrics: numbers and strings as they are, a list as its JSON.
    EXPECT_DOUBLE_EQ(got["metrics"]["user_attrs_accuracy"].get<double>(),
                     want["user_attrs"]["accuracy"].get<double>());
    EXPECT_EQ(got["metrics"]["user_attrs_note"], want["user_attrs"]["note"]);
    EXPECT_EQ(got["metrics"]["user_attrs_shape"], want["user_attrs"]["shape"].dump());
    EXPECT_DOUBLE_EQ(got["metrics"]["value"].get<double>(), want["values"][0].get<double>());
    EXPECT_EQ(got["metrics"]["optuna_number"], want["number"]);
  }
  EXPECT_EQ(results["best"]["trial"], truth["best"]["number"].get<int>() + 1);
  EXPECT_DOUBLE_EQ(results["best"]["value"].get<double>(), truth["best"]["value"].get<double>());

  const v1::ExperimentSpec spec = StoredSpec(dir);
  EXPECT_EQ(spec.search().sampler(), v1::Search::TPE);
  EXPECT_EQ(spec.search().mode(), v1::Search::ASK_TELL);
  EXPECT_EQ(spec.search().max_trials(), 8 + 100);  // room for kImportedRoom more by default
  EXPECT_EQ(spec.search().max_concurrent(), 8);    // several askers at once, as in Optuna
  const v1::Parameter* lr = FindParameter(spec, "lr");
  EXPECT_EQ(lr->type(), v1::Parameter::FLOAT);
  EXPECT_TRUE(lr->log());
  EXPECT_DOUBLE_EQ(lr->min(), 1e-5);
  EXPECT_DOUBLE_EQ(lr->max(), 0.1);
  const v1::Parameter* m = FindParameter(spec, "m");
  EXPECT_EQ(m->type(), v1::Parameter::INT);
  EXPECT_TRUE(m->log());
  EXPECT_EQ(m->max(), 64);
  const v1::Parameter* n = FindParameter(spec, "n");  // step 2 over [1, 9]
  EXPECT_EQ(n->type(), v1::Parameter::INT);
  EXPECT_FALSE(n->log());
  EXPECT_EQ(n->min(), 1);
  EXPECT_EQ(n->max(), 9);
  EXPECT_EQ(n->step(), 2);
  const v1::Parameter* f = FindParameter(spec, "f");  // step 0.25 over [0, 1]
  EXPECT_EQ(f->type(), v1::Parameter::FLOAT);
  EXPECT_EQ(f->max(), 1);
  EXPECT_EQ(f->step(), 0.25);
  EXPECT_EQ(m->step(), 0);  // log, Optuna's step 1
  EXPECT_THAT(FindParameter(spec, "act")->values(),
              ElementsAre("relu", "tanh", "None", "3", "1.5", "True"));
  const v1::Parameter* slope = FindParameter(spec, "slope");
  EXPECT_EQ(slope->when().size(), 1u);
  EXPECT_EQ(slope->when().at("act"), "relu");

  // The generated file is that same experiment, and the checks accept it.
  const std::string yaml = ReadFile(dir + "/experiment.yaml");
  EXPECT_THAT(yaml, HasSubstr("n: {type: int, min: 1, max: 9, step: 2}"));
  EXPECT_THAT(yaml, HasSubstr("f: {type: float, min: 0, max: 1, step: 0.25}"));
  LoadResult loaded =
      LoadExperimentFile((fs::path(dir).lexically_normal() / "experiment.yaml").string());
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded.spec.SerializeAsString(), spec.SerializeAsString());
  testing::CommandOutput validate = RunProcess({kSextant, "validate", dir + "/experiment.yaml"});
  EXPECT_EQ(validate.exit_code, 0) << validate.err;

  testing::CommandOutput report = RunProcess({kSextant, "report", dir, "-o", tmp + "/report.html"});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  EXPECT_THAT(ReadFile(tmp + "/report.html"), HasSubstr("basic-study"));

  // Everything Optuna stored is kept, in meta "optuna_import".
  auto store = Store::Open(RunDir::DbPath(dir), false, true);
  ASSERT_TRUE(store.ok());
  auto record = (*store)->GetMeta("optuna_import");
  ASSERT_TRUE(record.ok() && *record);
  const Json r = Json::parse(**record);
  EXPECT_EQ(r["study"], "Basic Study");
  EXPECT_EQ(r["alembic_version"], "v3.0.0.d");
  EXPECT_EQ(r["trials"].size(), 8u);
  EXPECT_EQ(r["trials"][0]["user_attrs"]["shape"], truth["trials"][0]["user_attrs"]["shape"]);
}

TEST(OptunaImportTest, ResumeOfACompleteImportEndsAtOnce) {
  const std::string tmp = MakeTempDir("optuna-resume");
  MakeStudies(tmp, kTinyStudy);
  const std::string dir = tmp + "/imported";
  // Complete: max_trials is the imported trials (not the default room for more).
  ASSERT_TRUE(Import(tmp + "/tiny.db", "tiny", dir, {}, 3).ok());
  testing::CommandOutput resume = RunProcess({kSextant, "resume", dir}, 120);
  EXPECT_EQ(resume.exit_code, 0) << resume.err;
  const Json results = Results(dir);
  EXPECT_EQ(results["state"], "COMPLETED");
  ASSERT_EQ(results["trials"].size(), 3u);
  for (const Json& t : results["trials"]) EXPECT_EQ(t["state"], "COMPLETED");
}

// With room left in max_trials, the imported study continues by ask and tell, from the
// command line on the folder (as Optuna's load_study, ask and tell would).
TEST(OptunaImportTest, ContinuesTheSearchByAskAndTell) {
  const std::string tmp = MakeTempDir("optuna-continue");
  const Json truth = MakeStudies(tmp, kTinyStudy)["tiny"];
  const std::string dir = tmp + "/imported";
  testing::CommandOutput import = RunProcess({kSextant, "import", "optuna", tmp + "/tiny.db",
                                              "--study", "tiny", "-o", dir, "--max-trials", "4"});
  ASSERT_EQ(import.exit_code, 0) << import.err;
  testing::CommandOutput ask = RunProcess({kSextant, "ask", dir});
  ASSERT_EQ(ask.exit_code, 0) << ask.err;
  const Json asked = Json::parse(ask.out, nullptr, false);
  ASSERT_TRUE(asked.is_object()) << ask.out;
  EXPECT_EQ(asked["trial"], 4);
  EXPECT_TRUE(asked["params"]["x"].is_number());
  EXPECT_TRUE(asked["params"]["k"].is_number_integer());
  testing::CommandOutput tell = RunProcess({kSextant, "tell", dir, "4", "--value", "0.25"});
  ASSERT_EQ(tell.exit_code, 0) << tell.err;
  const Json results = Results(dir);
  ASSERT_EQ(results["trials"].size(), 4u);
  EXPECT_EQ(results["trials"][3]["state"], "COMPLETED");
  EXPECT_EQ(results["trials"][3]["value"], 0.25);
  EXPECT_EQ(results["best"]["trial"], 4);
  // The search is now at max_trials: nothing more to ask, and the message says how to go on.
  testing::CommandOutput ended = RunProcess({kSextant, "ask", dir});
  EXPECT_EQ(ended.out, "");
  EXPECT_THAT(ended.err, HasSubstr("sextant resume " + dir + " --max-trials N"));
}

// By default an imported study has room to go on, as an Optuna study does, and says so.
TEST(OptunaImportTest, AnImportedStudyContinuesByDefault) {
  const std::string tmp = MakeTempDir("optuna-room");
  MakeStudies(tmp, kTinyStudy);
  const std::string dir = tmp + "/imported";
  testing::CommandOutput import =
      RunProcess({kSextant, "import", "optuna", "sqlite:///" + tmp + "/tiny.db", "--study", "tiny",
                  "-o", dir});
  ASSERT_EQ(import.exit_code, 0) << import.err;
  EXPECT_THAT(import.out, HasSubstr("room for 100 more trials (search.max_trials 103; change it "
                                    "with `sextant resume " +
                                    dir + " --max-trials N`)"));
  testing::CommandOutput ask = RunProcess({kSextant, "ask", dir});
  ASSERT_EQ(ask.exit_code, 0) << ask.err;
  EXPECT_THAT(ask.out, HasSubstr("\"trial\":4"));
}

// An imported directory seeds a new run's sampler through search.warm_start.
TEST(OptunaImportTest, AnImportedRunWarmStartsANewOne) {
  const std::string tmp = MakeTempDir("optuna-warm");
  const Json truth = MakeStudies(tmp, kTinyStudy)["tiny"];
  const std::string dir = tmp + "/imported";
  ASSERT_TRUE(Import(tmp + "/tiny.db", "tiny", dir).ok());
  LoadResult loaded = LoadExperimentFromString(absl::StrCat(R"(
name: tiny-more
objective: {metric: value, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
  k: {type: int, min: 1, max: 3}
search: {sampler: tpe, max_trials: 5, warm_start: {runs: [)",
                                                            dir, R"(]}}
trial: {command: [python3, objective.py, "--x=${x}", "--k=${k}"]}
)"),
                                               tmp + "/more.yaml");
  ASSERT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors[0].ToString());
  auto warm = ReadWarmStart(loaded.spec);
  ASSERT_TRUE(warm.ok()) << warm.status();
  ASSERT_EQ(warm->trials.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(warm->trials[i].trial, static_cast<int64_t>(i) + 1);
    ASSERT_EQ(warm->trials[i].values.size(), 1u);
    EXPECT_DOUBLE_EQ(warm->trials[i].values[0], truth["trials"][i]["values"][0].get<double>());
  }
}

// Optuna users name storages by URL and rarely have more than one study in a file.
TEST(OptunaImportTest, AcceptsTheStorageUrlAndTheStoragesOnlyStudy) {
  const std::string tmp = MakeTempDir("optuna-url");
  MakeStudies(tmp, kTwoObjectives);  // mo.db: the study "mo" alone
  MakeStudies(tmp, kTinyStudy);      // tiny.db: "tiny" and "second one"
  testing::CommandOutput r =
      RunProcess({"/bin/sh", "-c",
                  absl::StrCat("cd ", tmp, " && ", kSextant, " import optuna sqlite:///mo.db")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(R"(of the Optuna study "mo" into runs/mo)"));
  EXPECT_THAT(r.out, HasSubstr("trial numbers: Optuna's trials 0 to 5 are Sextant's trials 1 to 6 "
                               "(Sextant's id = Optuna's number + 1); each keeps its Optuna "
                               "number as the metric optuna_number"));
  EXPECT_TRUE(fs::exists(tmp + "/runs/mo/state.db"));

  // sqlite:////abs/path: the fourth slash starts an absolute path.
  ASSERT_EQ(tmp.front(), '/');
  r = RunProcess(
      {kSextant, "import", "optuna", "sqlite:///" + tmp + "/mo.db", "-o", tmp + "/absolute"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json results = Results(tmp + "/absolute");
  ASSERT_EQ(results["trials"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(results["trials"][i]["id"], i + 1);
    EXPECT_EQ(results["trials"][i]["metrics"]["optuna_number"], i);
  }

  r = RunProcess({kSextant, "import", "optuna", "sqlite:///" + tmp + "/tiny.db"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(R"(holds 2 studies; name one with --study: "tiny", "second one")"));
  r = RunProcess({kSextant, "import", "optuna", "sqlite:///" + tmp + "/tiny.db", "--study", "tiny",
                  "-o", tmp + "/tiny"});
  EXPECT_EQ(r.exit_code, 0) << r.err;

  r = RunProcess({kSextant, "import", "optuna", "postgresql://me@db/optuna"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("only SQLite storages can be imported"));
  EXPECT_THAT(r.err, HasSubstr("optuna.copy_study"));
  r = RunProcess({kSextant, "import", "optuna", "sqlite:///" + tmp + "/none.db"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(tmp + "/none.db: no such file"));
}

// Optuna's suggest_int("n", 1, 9, step=2) allows odd values only: the continued search must too.
TEST(OptunaImportTest, KeepsTheStepSoNewTrialsStayOnOptunasGrid) {
  const std::string tmp = MakeTempDir("optuna-step");
  MakeStudies(tmp, kBasicStudy);
  const std::string dir = tmp + "/imported";
  testing::CommandOutput r = RunProcess({kSextant, "import", "optuna", tmp + "/study.db", "--study",
                                         "Basic Study", "-o", dir, "--max-trials", "40"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Asked and told one at a time, as an Optuna loop would.
  std::set<int64_t> ns;
  std::set<double> fs_seen;
  for (int i = 0; i < 16; ++i) {
    testing::CommandOutput ask = RunProcess({kSextant, "ask", dir});
    ASSERT_EQ(ask.exit_code, 0) << ask.err;
    const Json trial = Json::parse(ask.out, nullptr, false);
    ASSERT_TRUE(trial.is_object()) << ask.out;
    const int64_t n = trial["params"]["n"].get<int64_t>();
    const double f = trial["params"]["f"].get<double>();
    EXPECT_EQ(n % 2, 1) << ask.out;
    EXPECT_TRUE(n >= 1 && n <= 9) << ask.out;
    EXPECT_EQ(f * 4, std::round(f * 4)) << ask.out;
    EXPECT_TRUE(f >= 0 && f <= 1) << ask.out;
    ns.insert(n);
    fs_seen.insert(f);
    const std::string value = absl::StrCat((n - 5) * (n - 5) + f);
    testing::CommandOutput tell =
        RunProcess({kSextant, "tell", dir, trial["trial"].dump(), "--value", value});
    ASSERT_EQ(tell.exit_code, 0) << tell.err;
  }
  EXPECT_GE(ns.size(), 2u);
  EXPECT_GE(fs_seen.size(), 3u);

  // Trials that disagree on the step: none is kept, and the import says why.
  const std::string mixed = EditedCopy(
      tmp + "/study.db",
      R"(UPDATE trial_params SET distribution_json = replace(distribution_json, '"step": 2', '"step": 1')
         WHERE param_name = 'n' AND trial_id = (SELECT MIN(trial_id) FROM trials))");
  auto summary = Import(mixed, "Basic Study", tmp + "/mixed");
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(FindParameter(StoredSpec(tmp + "/mixed"), "n")->step(), 0);
  EXPECT_THAT(summary->notes,
              ::testing::Contains(HasSubstr("n: Optuna's step differs between trials (none and 2): "
                                            "no step here")));
}

// The verb on the command line: the default directory, --help, and an error's exit code.
TEST(OptunaImportTest, CommandLineWritesRunsStudyNameByDefault) {
  const std::string tmp = MakeTempDir("optuna-cli");
  MakeStudies(tmp, kTinyStudy);
  testing::CommandOutput r = RunProcess(
      {"/bin/sh", "-c",
       absl::StrCat("cd ", tmp, " && ", kSextant, " import optuna tiny.db --study 'second one'")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("imported 3 trials"));
  EXPECT_TRUE(fs::exists(tmp + "/runs/second-one/state.db"));
  EXPECT_TRUE(fs::exists(tmp + "/runs/second-one/experiment.yaml"));
  EXPECT_EQ(Results(tmp + "/runs/second-one")["experiment"], "second-one");
  // Once more: the directory is taken now.
  r = RunProcess(
      {"/bin/sh", "-c",
       absl::StrCat("cd ", tmp, " && ", kSextant, " import optuna tiny.db --study 'second one'")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("runs/second-one already exists and is not empty"));
  r = RunProcess({kSextant, "import", "optuna", tmp + "/tiny.db", "--study", "third"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(R"(its studies: "tiny", "second one")"));
  r = RunProcess({kSextant, "import", "optuna", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("--study"));
  EXPECT_THAT(r.out, HasSubstr("--max-trials"));
  r = RunProcess({kSextant, "import", "optuna", tmp + "/tiny.db"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--study"));
}

TEST(OptunaImportTest, ImportsSeveralObjectivesWithTheirDirections) {
  const std::string tmp = MakeTempDir("optuna-mo");
  const Json truth = MakeStudies(tmp, kTwoObjectives)["mo"];
  ASSERT_TRUE(Import(tmp + "/mo.db", "mo", tmp + "/a").ok());
  Json results = Results(tmp + "/a");
  EXPECT_EQ(results["objectives"], Json::parse(R"([{"metric": "values_0", "goal": "minimize"},
                            {"metric": "values_1", "goal": "maximize"}])"));
  ASSERT_EQ(results["trials"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const Json& got = results["trials"][i]["values"];
    ASSERT_EQ(got.size(), 2u);
    EXPECT_DOUBLE_EQ(got[0].get<double>(), truth["trials"][i]["values"][0].get<double>());
    EXPECT_DOUBLE_EQ(got[1].get<double>(), truth["trials"][i]["values"][1].get<double>());
  }
  EXPECT_FALSE(results["pareto"].empty());
  EXPECT_EQ(StoredSpec(tmp + "/a").search().sampler(), v1::Search::NSGA2);

  // --metric names the objectives.
  ASSERT_TRUE(Import(tmp + "/mo.db", "mo", tmp + "/b", {"loss", "accuracy"}).ok());
  results = Results(tmp + "/b");
  EXPECT_EQ(results["objectives"][0]["metric"], "loss");
  EXPECT_EQ(results["objectives"][1]["metric"], "accuracy");
  EXPECT_DOUBLE_EQ(results["trials"][0]["metrics"]["accuracy"].get<double>(),
                   truth["trials"][0]["values"][1].get<double>());
  auto wrong = Import(tmp + "/mo.db", "mo", tmp + "/c", {"loss"});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr("2 objectives"));
  EXPECT_FALSE(fs::exists(tmp + "/c"));
  testing::CommandOutput report =
      RunProcess({kSextant, "report", tmp + "/a", "-o", tmp + "/r.html"});
  EXPECT_EQ(report.exit_code, 0) << report.err;
}

TEST(OptunaImportTest, KeepsPrunedTrialsIntermediateValuesAndUnfinishedStates) {
  const std::string tmp = MakeTempDir("optuna-pruned");
  const Json truth = MakeStudies(tmp, kPrunedStudy)["pruned"];
  const std::string dir = tmp + "/imported";
  ASSERT_TRUE(Import(tmp + "/pruned.db", "pruned", dir).ok());
  const Json results = Results(dir);
  EXPECT_EQ(results["state"], "INTERRUPTED");  // resume continues the unfinished trials
  ASSERT_EQ(results["trials"].size(), truth["trials"].size());
  auto store = Store::Open(RunDir::DbPath(dir), false, true);
  ASSERT_TRUE(store.ok());
  int pruned = 0;
  for (size_t i = 0; i < truth["trials"].size(); ++i) {
    const Json& want = truth["trials"][i];
    const Json& got = results["trials"][i];
    const std::string state = want["state"];
    SCOPED_TRACE(absl::StrCat("trial ", want["number"].get<int>(), " ", state));
    const std::map<std::string, std::string> mapped = {{"COMPLETE", "COMPLETED"},
                                                       {"PRUNED", "PRUNED"},
                                                       {"FAIL", "FAILED"},
                                                       {"RUNNING", "CANCELLED"},
                                                       {"WAITING", "PENDING"}};
    EXPECT_EQ(got["state"], mapped.at(state));
    // Each intermediate value is a measurement keyed by its step.
    auto ms = (*store)->LoadMeasurements(got["id"].get<int64_t>());
    ASSERT_TRUE(ms.ok());
    std::vector<std::pair<int64_t, double>> steps;
    for (const MeasurementRow& m : *ms) {
      const Json j = Json::parse(m.metrics_json);
      if (j.contains("step"))
        steps.emplace_back(j["step"].get<int64_t>(), j["value"].get<double>());
    }
    ASSERT_EQ(steps.size(), want["intermediate"].size());
    for (size_t k = 0; k < steps.size(); ++k) {
      EXPECT_EQ(steps[k].first, want["intermediate"][k][0].get<int64_t>());
      EXPECT_DOUBLE_EQ(steps[k].second, want["intermediate"][k][1].get<double>());
    }
    if (!steps.empty()) {
      EXPECT_EQ(got["fidelity"], steps.back().first);
    }
    if (state == "PRUNED") {
      ++pruned;
      EXPECT_DOUBLE_EQ(got["value"].get<double>(), want["values"][0].get<double>());
    }
    if (state == "WAITING") {
      EXPECT_EQ(got["params"], Json({{"q", 0.25}}));
    }
    if (state == "RUNNING") {
      EXPECT_DOUBLE_EQ(got["params"]["q"].get<double>(), want["params"]["q"].get<double>());
      EXPECT_THAT(got["events"].dump(), HasSubstr("RUNNING in Optuna"));
    }
    if (state == "FAIL") {
      EXPECT_FALSE(got["error"].is_null());
    }
  }
  EXPECT_GT(pruned, 0);
  EXPECT_EQ(results["best"]["trial"], truth["best"]["number"].get<int>() + 1);
  const v1::ExperimentSpec spec = StoredSpec(dir);
  EXPECT_EQ(spec.search().scheduler(), v1::Search::MEDIAN);
  EXPECT_EQ(spec.search().fidelity().name(), "step");
  EXPECT_EQ(spec.search().fidelity().min(), 1);
  EXPECT_EQ(spec.search().fidelity().max(), 5);
  EXPECT_EQ(spec.objective().goal(), v1::Objective::MAXIMIZE);
  testing::CommandOutput validate = RunProcess({kSextant, "validate", dir + "/experiment.yaml"});
  EXPECT_EQ(validate.exit_code, 0) << validate.err;
  testing::CommandOutput report = RunProcess({kSextant, "report", dir, "-o", tmp + "/r.html"});
  EXPECT_EQ(report.exit_code, 0) << report.err;
}

TEST(OptunaImportTest, InfersConditionsWhereACategoricalOrIntParentDecides) {
  const std::string tmp = MakeTempDir("optuna-cond");
  const Json truth = MakeStudies(tmp, kConditionalStudy)["cond"];
  const std::string dir = tmp + "/imported";
  ASSERT_TRUE(Import(tmp + "/cond.db", "cond", dir).ok());
  const v1::ExperimentSpec spec = StoredSpec(dir);
  EXPECT_EQ(FindParameter(spec, "kind")->when().size(), 0u);
  ASSERT_EQ(FindParameter(spec, "depth")->when().size(), 1u);
  EXPECT_EQ(FindParameter(spec, "depth")->when().at("kind"), "tree");
  ASSERT_EQ(FindParameter(spec, "alpha")->when().size(), 1u);
  EXPECT_EQ(FindParameter(spec, "alpha")->when().at("kind"), "linear");
  ASSERT_EQ(FindParameter(spec, "leaf")->when().size(), 1u);  // nested: under depth = 3
  EXPECT_EQ(FindParameter(spec, "leaf")->when().at("depth"), "3");
  // noise follows the trial number, not a parameter: unconditional, absent where not suggested.
  EXPECT_EQ(FindParameter(spec, "noise")->when().size(), 0u);
  EXPECT_THAT(ReadFile(dir + "/experiment.yaml"), HasSubstr("noise: absent in"));
  const Json results = Results(dir);
  for (size_t i = 0; i < truth["trials"].size(); ++i) {
    std::vector<std::string> want, got;
    for (const auto& [k, v] : truth["trials"][i]["params"].items()) want.push_back(k);
    for (const auto& [k, v] : results["trials"][i]["params"].items()) got.push_back(k);
    EXPECT_EQ(got, want) << "trial " << i;
  }
  testing::CommandOutput validate = RunProcess({kSextant, "validate", dir + "/experiment.yaml"});
  EXPECT_EQ(validate.exit_code, 0) << validate.err;
}

TEST(OptunaImportTest, ReadsTheLegacyDistributionNames) {
  const std::string tmp = MakeTempDir("optuna-legacy");
  MakeStudies(tmp, kTinyStudy);
  // As Optuna < 3.0 stored them: x as LogUniform, k as IntUniform with a step.
  const std::string db = EditedCopy(tmp + "/tiny.db", R"sql(
    UPDATE trial_params SET param_value = 0.5, distribution_json =
      '{"name": "LogUniformDistribution", "attributes": {"low": 0.01, "high": 1.0}}'
      WHERE param_name = 'x';
    UPDATE trial_params SET distribution_json =
      '{"name": "IntUniformDistribution", "attributes": {"low": 1, "high": 3, "step": 1}}'
      WHERE param_name = 'k';)sql");
  ASSERT_TRUE(Import(db, "tiny", tmp + "/a").ok());
  v1::ExperimentSpec spec = StoredSpec(tmp + "/a");
  EXPECT_TRUE(FindParameter(spec, "x")->log());
  EXPECT_EQ(FindParameter(spec, "x")->min(), 0.01);
  EXPECT_EQ(FindParameter(spec, "k")->type(), v1::Parameter::INT);
  const std::string discrete = EditedCopy(tmp + "/tiny.db", R"sql(
    UPDATE trial_params SET param_value = 0.5, distribution_json =
      '{"name": "DiscreteUniformDistribution", "attributes": {"low": 0.0, "high": 1.0, "q": 0.5}}'
      WHERE param_name = 'x';)sql");
  ASSERT_TRUE(Import(discrete, "tiny", tmp + "/b").ok());
  EXPECT_EQ(FindParameter(StoredSpec(tmp + "/b"), "x")->type(), v1::Parameter::FLOAT);
  EXPECT_EQ(FindParameter(StoredSpec(tmp + "/b"), "x")->step(), 0.5);  // q is the step
  EXPECT_THAT(ReadFile(tmp + "/b/experiment.yaml"),
              HasSubstr("x: {type: float, min: 0, max: 1, step: 0.5}"));
}

// Each bad input: a clear error naming what is wrong, exit 2, and nothing written.
TEST(OptunaImportTest, RefusesBadInputAndWritesNothing) {
  const std::string tmp = MakeTempDir("optuna-errors");
  MakeStudies(tmp, kTinyStudy);
  const std::string good = tmp + "/tiny.db";
  const std::string out = tmp + "/out";
  fs::create_directories(out);
  auto expect_refused = [&](const std::string& storage, const std::string& study,
                            const std::string& needle) {
    SCOPED_TRACE(needle);
    OptunaImportOptions options{storage, study, out + "/imported", {}};
    FakeClock clock(absl::FromUnixSeconds(1'700'000'000));
    std::ostringstream o, e;
    EXPECT_EQ(RunOptunaImport(options, &clock, o, e), 2);
    EXPECT_THAT(e.str(), HasSubstr(needle));
    ExpectNothingWritten(out, out + "/imported");
  };
  expect_refused(tmp + "/missing.db", "tiny", "no such file");
  expect_refused(good, "nope", R"(no study named "nope"; its studies: "tiny", "second one")");

  // Not SQLite at all, and SQLite damaged in the middle of its pages.
  WriteFile(tmp + "/text.db", std::string(8192, 'x'));
  expect_refused(tmp + "/text.db", "tiny",
                 "not an Optuna storage: neither an SQLite database nor an Optuna journal file");
  const std::string corrupt = tmp + "/corrupt.db";
  fs::copy_file(good, corrupt);
  {
    std::string bytes = ReadFile(corrupt);
    ASSERT_GT(bytes.size(), 3u * 4096);
    for (size_t i = 4096; i < bytes.size(); i += 97) bytes[i] = static_cast<char>(0xA5);
    WriteFile(corrupt, bytes);
  }
  expect_refused(corrupt, "tiny", tmp + "/corrupt.db: ");

  // SQLite, but not Optuna's.
  Sql(tmp + "/other.db", "CREATE TABLE studies(id INTEGER); CREATE TABLE notes(t TEXT);");
  expect_refused(tmp + "/other.db", "tiny", "not an Optuna storage");

  expect_refused(EditedCopy(good, "UPDATE alembic_version SET version_num = 'v9.9.9.z'"), "tiny",
                 "unsupported Optuna storage schema v9.9.9.z");
  expect_refused(EditedCopy(good, "UPDATE alembic_version SET version_num = 'v1.3.0.a'"), "tiny",
                 "optuna storage upgrade");
  expect_refused(EditedCopy(good, "UPDATE version_info SET schema_version = 13"), "tiny",
                 "schema_version 13");
  expect_refused(EditedCopy(good, R"sql(UPDATE trial_params SET distribution_json =
      '{"name": "FancyDistribution", "attributes": {"low": 0}}' WHERE param_name = 'k')sql"),
                 "tiny", "unsupported distribution 'FancyDistribution'");
  expect_refused(EditedCopy(good, R"sql(UPDATE trial_params SET param_value = 5, distribution_json =
      '{"name": "CategoricalDistribution", "attributes": {"choices": [1, 2]}}' WHERE param_name = 'k')sql"),
                 "tiny", "choice index 5");
}

// A hostile storage: ids that match a trial by SQL affinity but read back as another number,
// rows that name no trial, values of the wrong type and absurd sizes. Each is refused by the
// command with exit 2 and a message naming the table and the row; nothing is written.
TEST(OptunaImportTest, RefusesAHostileStorageWithoutCrashingOrWriting) {
  const std::string tmp = MakeTempDir("optuna-hostile");
  MakeStudies(tmp, kTinyStudy);
  const std::string good = tmp + "/tiny.db";
  const std::string out = tmp + "/out";
  fs::create_directories(out);
  auto expect_refused = [&](const std::string& storage, const std::string& needle) {
    SCOPED_TRACE(needle);
    testing::CommandOutput r = RunProcess(
        {kSextant, "import", "optuna", storage, "--study", "tiny", "-o", out + "/imported"});
    EXPECT_EQ(r.exit_code, 2) << r.err;  // a signal would read -N
    EXPECT_THAT(r.err, HasSubstr(needle));
    ExpectNothingWritten(out, out + "/imported");
  };
  // trial_params rebuilt without column types, so that the text '20e-1' is kept as text: it
  // matches trial 2 by numeric affinity, and reads back as 20, a trial that does not exist.
  expect_refused(EditedCopy(good, R"sql(
    ALTER TABLE trial_params RENAME TO old_params;
    CREATE TABLE trial_params (param_id INTEGER PRIMARY KEY, trial_id, param_name, param_value,
                               distribution_json);
    INSERT INTO trial_params SELECT param_id, trial_id, param_name, param_value,
                                    distribution_json FROM old_params;
    DROP TABLE old_params;
    UPDATE trial_params SET trial_id = '20e-1' WHERE param_id = 3;)sql"),
                 R"(trial_params row param_id = 3: trial_id "20e-1" is not an integer id)");
  // Rows of trials that do not exist, in each table that references one.
  expect_refused(
      EditedCopy(good, "UPDATE trial_values SET trial_id = 999 WHERE trial_value_id = 2"),
      "trial_values row trial_value_id = 2: trial_id 999 names no row of trials");
  expect_refused(EditedCopy(good, "INSERT INTO trial_heartbeats VALUES (7, 77, '2024-01-01')"),
                 "trial_heartbeats row trial_heartbeat_id = 7: trial_id 77 names no row of trials");
  expect_refused(
      EditedCopy(good, "INSERT INTO trial_user_attributes VALUES (5, NULL, 'k', '1')"),
      "trial_user_attributes row trial_user_attribute_id = 5: trial_id NULL is not an integer id");
  expect_refused(
      EditedCopy(good, "INSERT INTO study_directions VALUES (9, 'MINIMIZE', 42, 1)"),
      "study_directions row study_direction_id = 9: study_id 42 names no row of studies");
  // Values of the wrong type.
  expect_refused(EditedCopy(good, "UPDATE trial_params SET param_value = 'abc' WHERE param_id = 1"),
                 R"(trial_params row param_id = 1: param_value "abc" is not a number)");
  expect_refused(EditedCopy(good, "UPDATE trials SET number = NULL WHERE trial_id = 2"),
                 "trials row trial_id = 2: number NULL is not an integer");
  expect_refused(EditedCopy(good, "UPDATE trials SET state = X'00FF' WHERE trial_id = 1"),
                 "trials row trial_id = 1: state a blob of 2 bytes is not text");
  expect_refused(
      EditedCopy(good, "UPDATE studies SET study_name = CAST(X'FF' AS TEXT) WHERE study_id = 2"),
      R"(studies row study_id = 2: study_name "\uFFFD" is not UTF-8)");
  expect_refused(
      EditedCopy(good, "UPDATE version_info SET schema_version = '12th'"),
      R"(version_info row version_info_id = 1: schema_version "12th" is not an integer)");
  // Absurd sizes: a value past the bound, JSON nested past the stack's bound, an objective
  // index that would size every trial's values.
  expect_refused(EditedCopy(good, R"sql(INSERT INTO trial_user_attributes
      VALUES (1, 1, 'big', '"' || printf('%.*c', 5000000, 'x') || '"'))sql"),
                 "holds a value larger than 4194304 bytes");
  expect_refused(EditedCopy(good, R"sql(INSERT INTO trial_user_attributes
      VALUES (1, 1, 'deep', printf('%.*c', 100000, '[')))sql"),
                 "trial_user_attributes row trial_user_attribute_id = 1: value_json");
  expect_refused(
      EditedCopy(good, "UPDATE trial_values SET objective = 1000000 WHERE trial_value_id = 1"),
      "trial_values row trial_value_id = 1: objective 1000000 is not one of the study's 1 "
      "objectives");
  expect_refused(EditedCopy(good, R"sql(UPDATE trial_params SET distribution_json =
      '{"name": "IntDistribution", "attributes": {"low": 1, "high": 1e300, "step": 1}}'
      WHERE param_name = 'k')sql"),
                 "IntDistribution: invalid attributes");
  // The storage is unharmed by all of this: the original imports.
  testing::CommandOutput r =
      RunProcess({kSextant, "import", "optuna", good, "--study", "tiny", "-o", out + "/imported"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Strings a storage holds that YAML would read as syntax: a study name, a constant parameter's
// name, categorical choices, user attributes, the metric name and Optuna's library_version,
// each with line breaks, quotes, '#' and a `budget:` block.
constexpr const char* kCraftedStudy = R"py(
import sqlite3
BLOCK = "\nbudget: {max_cost: 0.01}\n"
NAME = "study" + BLOCK + "# "
CHOICES = ["plain", "a" + BLOCK, "tab\there \"q\" \\ back: [x] #c", "\u2028line\x85next\x01\x1b[31m"]
CONST = "c" + BLOCK + "#"
KEY, VALUE = "key" + BLOCK, "value" + BLOCK + "x: \"y\""
s = optuna.create_study(storage="sqlite:///" + DIR + "/crafted.db", study_name=NAME,
                        sampler=optuna.samplers.RandomSampler(seed=2))
def f(t):
    t.suggest_categorical("choice", CHOICES)
    t.suggest_float(CONST, 2, 2)
    t.set_user_attr(KEY, VALUE)
    return t.suggest_float("x", 0, 1)
s.optimize(f, n_trials=4)
record(s)
VERSION = '3.1.0"' + BLOCK + "#"
METRIC = 'acc"#:[budget]'
db = sqlite3.connect(DIR + "/crafted.db")
db.execute("UPDATE version_info SET library_version = ?", (VERSION,))
db.execute("INSERT INTO study_system_attributes (study_id, key, value_json) VALUES (1, ?, ?)",
           ("study:metric_names", json.dumps([METRIC])))
db.commit()
truth["crafted"] = {"name": NAME, "choices": CHOICES, "const": CONST, "key": KEY, "value": VALUE,
                    "version": VERSION, "metric": METRIC}
)py";

TEST(OptunaImportTest, EscapesEveryImportedStringWrittenIntoYaml) {
  const std::string tmp = MakeTempDir("optuna-yaml");
  const Json want = MakeStudies(tmp, kCraftedStudy)["crafted"];
  ASSERT_TRUE(want.is_object());
  const std::string dir = tmp + "/imported";
  testing::CommandOutput r =
      RunProcess({kSextant, "import", "optuna", tmp + "/crafted.db", "-o", dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("\x1b")));  // no terminal escapes pass through
  testing::CommandOutput validate = RunProcess({kSextant, "validate", dir + "/experiment.yaml"});
  EXPECT_EQ(validate.exit_code, 0) << validate.err;

  // No line of the file is YAML the import did not mean to write.
  const std::string yaml = ReadFile(dir + "/experiment.yaml");
  std::istringstream lines(yaml);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_FALSE(absl::StartsWith(line, "budget")) << line;
    EXPECT_EQ(line.find('\r'), std::string::npos) << line;
  }
  const v1::ExperimentSpec spec = StoredSpec(dir);
  LoadResult loaded =
      LoadExperimentFile((fs::path(dir) / "experiment.yaml").lexically_normal().string());
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded.spec.SerializeAsString(), spec.SerializeAsString());
  EXPECT_FALSE(spec.budget().has_max_cost());
  EXPECT_EQ(spec.budget().max_wall_time_seconds(), 0);

  // What YAML carries survives the round trip exactly.
  ASSERT_EQ(spec.parameters_size(), 2);  // the constant is not searched
  const v1::Parameter* choice = FindParameter(spec, "choice");
  std::vector<std::string> values(choice->values().begin(), choice->values().end());
  EXPECT_EQ(values, want["choices"].get<std::vector<std::string>>());
  EXPECT_EQ(spec.objective().metric(), want["metric"].get<std::string>());
  EXPECT_EQ(spec.name(), SanitizedStudyName(want["name"].get<std::string>()));
  // ... and so does what the run keeps beside it.
  auto store = Store::Open(RunDir::DbPath(dir), false, true);
  ASSERT_TRUE(store.ok());
  auto meta = (*store)->GetMeta("optuna_import");
  ASSERT_TRUE(meta.ok() && *meta);
  const Json record = Json::parse(**meta);
  EXPECT_EQ(record["library_version"], want["version"]);
  EXPECT_EQ(record["study"], want["name"]);
  EXPECT_TRUE(record["constants"].contains(want["const"].get<std::string>()));
  const Json results = Results(dir);
  ASSERT_FALSE(results["trials"].empty());
  EXPECT_EQ(results["trials"][0]["metrics"]["user_attrs_" + want["key"].get<std::string>()],
            want["value"]);

  // A metric name with a line break is refused, not written.
  const std::string refused = tmp + "/refused";
  r = RunProcess({kSextant, "import", "optuna", tmp + "/crafted.db", "-o", refused, "--metric",
                  "loss\nbudget:{max_cost:0.01}"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(R"(metric name "loss\nbudget:{max_cost:0.01}" cannot be used)"));
  ExpectNothingWritten(tmp, refused);
}

TEST(OptunaImportTest, RefusesToOverwriteANonEmptyDirectory) {
  const std::string tmp = MakeTempDir("optuna-exists");
  MakeStudies(tmp, kTinyStudy);
  WriteFile(tmp + "/taken/keep.txt", "mine");
  auto r = Import(tmp + "/tiny.db", "tiny", tmp + "/taken");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(r.status().message(), HasSubstr("not empty"));
  EXPECT_EQ(ReadFile(tmp + "/taken/keep.txt"), "mine");
  EXPECT_FALSE(fs::exists(tmp + "/taken/state.db"));
  // An empty directory is fine.
  fs::create_directories(tmp + "/empty");
  EXPECT_TRUE(Import(tmp + "/tiny.db", "tiny", tmp + "/empty").ok());
  EXPECT_TRUE(fs::exists(tmp + "/empty/state.db"));
}

TEST(OptunaImportTest, SanitizesTheStudyNameForTheDefaultDirectory) {
  EXPECT_EQ(SanitizedStudyName("Basic Study"), "basic-study");
  EXPECT_EQ(SanitizedStudyName("  lr/sweep #3 "), "lr-sweep-3");
  EXPECT_EQ(SanitizedStudyName("ok_name-1"), "ok_name-1");
  EXPECT_EQ(SanitizedStudyName("???"), "optuna-study");
}

}  // namespace
}  // namespace sextant
