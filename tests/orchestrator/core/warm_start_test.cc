// search.enqueue and search.warm_start: the loader's checks, the order trials run in, resume,
// the priors a sampler is seeded with, and how results and the report show them. Runs go
// through the real Dispatcher over real SQLite stores; the last tests run the binaries.
#include "orchestrator/core/warm_start.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/results.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/strategy_factory.h"
#include "orchestrator/report/report.h"
#include "orchestrator/report/report_data.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::SpecFromYaml;
using testing::WriteFile;

// An experiment over x, y in [0, 1] and a categorical act. {{SAMPLER}}, {{SEARCH}} and
// {{OBJECTIVE}} are filled in by Yaml().
constexpr const char* kTemplate = R"(name: ws
objective: {{OBJECTIVE}}
parameters:
  x: {type: float, min: 0, max: 1}
  y: {type: float, min: 0, max: 1}
  act: {type: categorical, values: [relu, tanh]}
search:
  sampler: {{SAMPLER}}
  seed: 4
  max_trials: {{TRIALS}}
{{SEARCH}}trial:
  command: [echo, "x=${x}"]
)";

// Where the warm start records a run directory: absolute, with no "//" or "./" in it.
std::string Normal(const std::string& path) {
  return std::filesystem::absolute(path).lexically_normal().string();
}

std::string Yaml(const std::string& sampler, int trials, const std::string& search = "",
                 const std::string& objective = "{metric: loss, goal: minimize}") {
  return absl::StrReplaceAll(kTemplate, {{"{{SAMPLER}}", sampler},
                                         {"{{TRIALS}}", absl::StrCat(trials)},
                                         {"{{SEARCH}}", search},
                                         {"{{OBJECTIVE}}", objective}});
}

double Num(const v1::ParamValue& v) { return v.has_integer() ? v.integer() : v.number(); }

// A bowl with its minimum 0 at (0.3, 0.7) and act=tanh.
double Bowl(const google::protobuf::Map<std::string, v1::ParamValue>& p) {
  const double dx = Num(p.at("x")) - 0.3, dy = Num(p.at("y")) - 0.7;
  return dx * dx + dy * dy + (p.at("act").category() == "tanh" ? 0 : 0.05);
}

// The bowl moved by (+0.1, -0.1): what an earlier run on a related problem measured.
double ShiftedBowl(const google::protobuf::Map<std::string, v1::ParamValue>& p) {
  const double dx = Num(p.at("x")) - 0.4, dy = Num(p.at("y")) - 0.6;
  return dx * dx + dy * dy + (p.at("act").category() == "tanh" ? 0 : 0.05);
}

using Objective = std::function<double(const google::protobuf::Map<std::string, v1::ParamValue>&)>;

// One run in dir through the real Dispatcher and sampler (MakeRunSampler), one trial at a
// time, each measured by objective, until the run ends or `stop_after` trials completed.
// Returns the parameters of the trials it leased, in order.
class DispatchedRun {
 public:
  DispatchedRun(std::string dir, v1::ExperimentSpec spec)
      : dir_(std::move(dir)), spec_(std::move(spec)) {}

  absl::Status Open() {
    std::filesystem::create_directories(dir_);
    SEXTANT_ASSIGN_OR_RETURN(store_, Store::Open(dir_ + "/state.db", true));
    SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> stored, store_->GetMeta("spec"));
    if (!stored) SEXTANT_RETURN_IF_ERROR(store_->PutMeta("spec", spec_.SerializeAsString()));
    SEXTANT_ASSIGN_OR_RETURN(auto sampler, MakeRunSampler(spec_, store_.get(), 1.7e9));
    SEXTANT_ASSIGN_OR_RETURN(
        dispatcher_,
        Dispatcher::Create(spec_, store_.get(), std::move(sampler), &clock_, DispatcherOptions{}));
    v1::RegisterRequest req;
    req.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
    SEXTANT_ASSIGN_OR_RETURN(v1::RegisterResponse r, dispatcher_->Register(req));
    worker_ = r.worker_id();
    return absl::OkStatus();
  }

  std::vector<google::protobuf::Map<std::string, v1::ParamValue>> Drive(const Objective& objective,
                                                                        int stop_after = 1 << 30) {
    std::vector<google::protobuf::Map<std::string, v1::ParamValue>> leased;
    for (int done = 0; done < stop_after; ++done) {
      absl::StatusOr<v1::LeaseResponse> lease = dispatcher_->Lease(worker_);
      if (!lease.ok() || !lease->has_assignment()) break;
      const v1::Assignment& a = lease->assignment();
      leased.push_back(a.params());
      v1::CompleteRequest req;
      req.set_worker_id(worker_);
      req.set_trial_id(a.trial_id());
      req.set_attempt(a.attempt());
      req.set_exit_code(0);
      v1::Measurement* m = req.add_measurements();
      m->set_trial_id(a.trial_id());
      m->set_attempt(a.attempt());
      m->set_sequence(1);
      (*m->mutable_metrics())["loss"] = objective(a.params());
      (*m->mutable_metrics())["accuracy"] = 1 - objective(a.params());
      EXPECT_TRUE(dispatcher_->Complete(req).ok());
    }
    return leased;
  }

  void Close() {
    if (dispatcher_) {
      EXPECT_TRUE(dispatcher_->MarkRunState(v1::RUN_COMPLETED).ok());
    }
    dispatcher_.reset();
    store_.reset();
  }

  Store* store() { return store_.get(); }

 private:
  std::string dir_;
  v1::ExperimentSpec spec_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Dispatcher> dispatcher_;
  int64_t worker_ = 0;
};

// A completed run of `objective` in dir.
void MakeRun(const std::string& dir, const v1::ExperimentSpec& spec, const Objective& objective) {
  DispatchedRun run(dir, spec);
  ASSERT_TRUE(run.Open().ok());
  run.Drive(objective);
  run.Close();
}

std::vector<std::string> Errors(const std::string& yaml, const std::string& file = "exp.yaml") {
  std::vector<std::string> out;
  for (const LoadError& e : LoadExperimentFromString(yaml, file).errors)
    out.push_back(e.ToString());
  return out;
}

// --- search.enqueue in the loader -------------------------------------------------------

TEST(EnqueueLoaderTest, KeepsEachConfigurationTypedAsItsParameter) {
  LoadResult r = LoadExperimentFromString(
      Yaml("tpe", 5,
           "  enqueue:\n    - {x: 0.25, y: 1, act: tanh}\n    - {x: 0, y: 0.5, act: relu}\n"),
      "exp.yaml");
  ASSERT_TRUE(r.ok()) << r.errors[0].ToString();
  ASSERT_EQ(r.spec.search().enqueue_size(), 2);
  const auto& first = r.spec.search().enqueue(0).params();
  EXPECT_EQ(first.at("x").number(), 0.25);
  EXPECT_EQ(first.at("y").number(), 1.0);
  EXPECT_EQ(first.at("act").category(), "tanh");
}

TEST(EnqueueLoaderTest, ValueOutOfRangeIsAnErrorAtItsLineAndColumn) {
  EXPECT_EQ(Errors(Yaml("tpe", 5, "  enqueue:\n    - {x: 1.5, y: 0.5, act: tanh}\n")),
            std::vector<std::string>({"exp.yaml:12:11: search.enqueue[0].x: 1.5 is above max 1"}));
}

TEST(EnqueueLoaderTest, WrongTypeUnknownAndMissingParametersAreErrorsNamingThem) {
  const std::string yaml = Yaml("tpe", 5,
                                "  enqueue:\n"
                                "    - {x: fast, y: 0.5, act: tanh}\n"
                                "    - {x: 0.1, y: 0.5, act: gelu}\n"
                                "    - {x: 0.1, yy: 0.5, act: relu}\n"
                                "    - [0.1, 0.5]\n");
  EXPECT_EQ(Errors(yaml),
            std::vector<std::string>(
                {"exp.yaml:12:11: search.enqueue[0].x: expected a number, got 'fast'",
                 "exp.yaml:13:29: search.enqueue[1].act: 'gelu' is not one of relu, tanh",
                 "exp.yaml:14:7: search.enqueue[2]: no value for the parameter 'y'",
                 "exp.yaml:14:16: search.enqueue[2].yy: unknown parameter; parameters: x, y, act "
                 "(did you mean 'y'?)",
                 "exp.yaml:15:7: search.enqueue[3]: expected a mapping of parameter values (e.g. "
                 "{x: ...}), got a list"}));
}

TEST(EnqueueLoaderTest, ConditionalParametersAreRequiredOnlyWhenActive) {
  const std::string base = R"(name: cond
objective: {metric: loss}
parameters:
  opt: {type: categorical, values: [sgd, adam]}
  momentum: {type: float, min: 0, max: 1, when: {opt: sgd}}
  width: {type: int, min: 16, max: 256}
search:
  max_trials: 4
  enqueue:
)";
  const std::string tail = "trial: {command: [echo]}\n";
  EXPECT_TRUE(Errors(base +
                     "    - {opt: adam, width: 64}\n    - {opt: sgd, momentum: 0.9, width: 16}\n" +
                     tail)
                  .empty());
  EXPECT_EQ(
      Errors(base + "    - {opt: sgd, width: 64}\n    - {opt: adam, momentum: 0.9, width: 300}\n" +
             tail),
      std::vector<std::string>(
          {"exp.yaml:10:7: search.enqueue[0]: no value for the parameter 'momentum' (its "
           "when: conditions hold here)",
           "exp.yaml:11:29: search.enqueue[1].momentum: set, but inactive (its when: "
           "conditions do not hold)",
           "exp.yaml:11:41: search.enqueue[1].width: 300 is above max 256"}));
  EXPECT_EQ(Errors(base + "    - {opt: adam, width: 64.5}\n" + tail),
            std::vector<std::string>(
                {"exp.yaml:10:26: search.enqueue[0].width: must be an integer, got 64.5"}));
}

TEST(EnqueueLoaderTest, MoreConfigurationsThanMaxTrialsIsAnError) {
  EXPECT_EQ(
      Errors(Yaml("tpe", 1,
                  "  enqueue:\n    - {x: 0.1, y: 0.5, act: tanh}\n"
                  "    - {x: 0.2, y: 0.5, act: tanh}\n")),
      std::vector<std::string>({"exp.yaml:12:5: search.enqueue: 2 configurations, but "
                                "search.max_trials is 1 (enqueued configurations are trials)"}));
}

// --- search.enqueue in a run -----------------------------------------------------------

TEST(EnqueueRunTest, EnqueuedConfigurationsRunFirstInOrderAndCountInMaxTrials) {
  for (const char* sampler : {"tpe", "bayesian", "random", "grid"}) {
    SCOPED_TRACE(sampler);
    const std::string dir = MakeTempDir("enqueue");
    DispatchedRun run(dir, SpecFromYaml(Yaml(sampler, 4,
                                             "  enqueue:\n    - {x: 0.9, y: 0.1, act: relu}\n"
                                             "    - {x: 0.3, y: 0.7, act: tanh}\n")));
    ASSERT_TRUE(run.Open().ok());
    auto leased = run.Drive(Bowl);
    ASSERT_EQ(leased.size(), 4u);
    EXPECT_EQ(leased[0].at("x").number(), 0.9);
    EXPECT_EQ(leased[0].at("act").category(), "relu");
    EXPECT_EQ(leased[1].at("x").number(), 0.3);
    EXPECT_EQ(leased[1].at("y").number(), 0.7);
    auto rows = *run.store()->LoadTrials();
    EXPECT_EQ(rows.size(), 4u);
    EXPECT_EQ(rows[1].state, v1::COMPLETED);
    EXPECT_EQ(*rows[1].value, 0.0);
  }
}

TEST(EnqueueRunTest, GridStillRunsItsFirstPointsAfterTheQueue) {
  const std::string dir = MakeTempDir("enqueue-grid");
  DispatchedRun run(
      dir, SpecFromYaml(Yaml("grid", 3, "  enqueue:\n    - {x: 0.5, y: 0.5, act: tanh}\n")));
  ASSERT_TRUE(run.Open().ok());
  auto leased = run.Drive(Bowl);
  ASSERT_EQ(leased.size(), 3u);
  // The grid's first point is its lowest corner, whatever ran before it.
  EXPECT_EQ(leased[1].at("x").number(), 0.0);
  EXPECT_EQ(leased[1].at("y").number(), 0.0);
}

TEST(EnqueueRunTest, ResumeDoesNotCreateTheEnqueuedConfigurationsAgain) {
  const std::string dir = MakeTempDir("enqueue-resume");
  const v1::ExperimentSpec spec = SpecFromYaml(Yaml("tpe", 5,
                                                    "  enqueue:\n"
                                                    "    - {x: 0.1, y: 0.1, act: relu}\n"
                                                    "    - {x: 0.2, y: 0.2, act: relu}\n"
                                                    "    - {x: 0.3, y: 0.3, act: relu}\n"));
  {
    DispatchedRun first(dir, spec);
    ASSERT_TRUE(first.Open().ok());
    EXPECT_EQ(first.Drive(Bowl, 2).size(), 2u);  // the orchestrator stops after two
  }
  DispatchedRun resumed(dir, spec);
  ASSERT_TRUE(resumed.Open().ok());
  auto leased = resumed.Drive(Bowl);
  ASSERT_EQ(leased.size(), 3u);
  EXPECT_EQ(leased[0].at("x").number(), 0.3) << "the third enqueued configuration comes next";
  auto rows = *resumed.store()->LoadTrials();
  ASSERT_EQ(rows.size(), 5u);
  int enqueued = 0;
  for (const TrialRow& t : rows) {
    for (const char* p :
         {"{\"act\":\"relu\",\"x\":0.1,\"y\":0.1}", "{\"act\":\"relu\",\"x\":0.2,\"y\":0.2}",
          "{\"act\":\"relu\",\"x\":0.3,\"y\":0.3}"}) {
      if (t.params_json == p) ++enqueued;
    }
  }
  EXPECT_EQ(enqueued, 3);
}

// --- search.warm_start ---------------------------------------------------------------

class WarmStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir("warm");
    old_ = root_ + "/runs/old";
    MakeRun(old_, SpecFromYaml(Yaml("random", 40)), ShiftedBowl);
  }

  // The new experiment, written beside the runs folder, that warm-starts from `runs`.
  std::string NewYaml(const std::string& sampler, int trials,
                      const std::string& runs = "[runs/old]",
                      const std::string& objective = "{metric: loss, goal: minimize}") {
    return Yaml(sampler, trials, absl::StrCat("  warm_start: {runs: ", runs, "}\n"), objective);
  }

  v1::ExperimentSpec Load(const std::string& yaml) {
    const std::string file = root_ + "/new.yaml";
    LoadResult r = LoadExperimentFromString(yaml, file);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.errors[0].ToString());
    return r.spec;
  }

  std::string root_, old_;
};

TEST_F(WarmStartTest, RelativeRunsAreJoinedToTheExperimentFilesFolder) {
  v1::ExperimentSpec spec = Load(NewYaml("tpe", 5));
  ASSERT_EQ(spec.search().warm_start().runs_size(), 1);
  EXPECT_EQ(spec.search().warm_start().runs(0), old_);
}

TEST_F(WarmStartTest, MissingRunDirectoryIsAnErrorAtItsEntry) {
  std::vector<std::string> errors =
      Errors(NewYaml("tpe", 5, "[runs/old, runs/nope]"), root_ + "/new.yaml");
  EXPECT_EQ(errors, std::vector<std::string>({absl::StrCat(
                        root_, "/new.yaml:11:33: search.warm_start.runs[1]: run directory ", root_,
                        "/runs/nope does not exist")}));
  std::filesystem::create_directories(root_ + "/runs/empty");
  errors = Errors(NewYaml("tpe", 5, "[runs/empty]"), root_ + "/new.yaml");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("runs/empty is not a Sextant run directory (no state.db)"),
            std::string::npos)
      << errors[0];
}

TEST_F(WarmStartTest, ObjectiveOfAnotherMetricOrGoalIsAnErrorNamingTheRunAndMetric) {
  std::vector<std::string> errors = Errors(
      NewYaml("tpe", 5, "[runs/old]", "{metric: accuracy, goal: maximize}"), root_ + "/new.yaml");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], absl::StrCat(root_, "/new.yaml:11:23: search.warm_start.runs[0]: run ", old_,
                                    " did not measure the objective 'accuracy': its objectives are "
                                    "'loss' (minimize); warm start needs runs of the same metric"));
  errors = Errors(NewYaml("tpe", 5, "[runs/old]", "{metric: loss, goal: maximize}"),
                  root_ + "/new.yaml");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find(absl::StrCat("run ", old_,
                                        " had the goal minimize for 'loss', this "
                                        "experiment has maximize; warm start needs the same goal")),
            std::string::npos)
      << errors[0];
  // At run time too, for a spec that did not come through the loader.
  v1::ExperimentSpec spec = Load(NewYaml("tpe", 5));
  spec.mutable_objective()->set_metric("accuracy");
  absl::StatusOr<WarmStart> warm = ReadWarmStart(spec);
  EXPECT_EQ(warm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(warm.status().message().find("'accuracy'"), std::string::npos);
}

TEST_F(WarmStartTest, ReadsEveryCompletedTrialAsAPriorInThisRunsUnits) {
  absl::StatusOr<WarmStart> warm = ReadWarmStart(Load(NewYaml("tpe", 5)));
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_EQ(warm->from, std::vector<std::string>({Normal(old_)}));
  EXPECT_EQ(warm->completed, 40);
  ASSERT_EQ(warm->trials.size(), 40u);
  EXPECT_EQ(warm->dropped_count(), 0);
  auto rows = *Store::Open(old_ + "/state.db", false, true).value()->LoadTrials();
  EXPECT_EQ(warm->trials[7].trial, 8);
  EXPECT_EQ(warm->trials[7].values, std::vector<double>({*rows[7].value}));
}

TEST_F(WarmStartTest, TrialsThatDoNotFitTheNewSpaceAreDroppedAndCountedByReason) {
  // The new space narrows x to [0, 0.5], drops act and adds a parameter z with a default-less
  // range: old trials have no z, so every one is dropped -- unless z is conditional.
  const std::string yaml = R"(name: narrow
objective: {metric: loss}
parameters:
  x: {type: float, min: 0, max: 0.5}
  y: {type: float, min: 0, max: 1}
  act: {type: categorical, values: [relu, tanh]}
search:
  sampler: tpe
  warm_start: {runs: [runs/old]}
trial: {command: [echo]}
)";
  absl::StatusOr<WarmStart> warm = ReadWarmStart(Load(yaml));
  ASSERT_TRUE(warm.ok()) << warm.status();
  const int outside = warm->dropped.count("'x' outside this space")
                          ? warm->dropped.at("'x' outside this space")
                          : 0;
  EXPECT_GT(outside, 5);
  EXPECT_EQ(warm->dropped_count(), outside);
  EXPECT_EQ(static_cast<int>(warm->trials.size()) + outside, 40);
  for (const PriorTrial& t : warm->trials) EXPECT_LE(std::get<double>(t.params.at("x")), 0.5);

  const std::string fewer =
      absl::StrReplaceAll(yaml, {{"  act: {type: categorical, values: [relu, tanh]}\n", ""}});
  warm = ReadWarmStart(Load(fewer));
  ASSERT_TRUE(warm.ok());
  EXPECT_EQ(warm->trials.size(), 0u);
  EXPECT_EQ(warm->dropped.at("parameter 'act' not in this space"), 40 - outside);

  const std::string more =
      absl::StrReplaceAll(yaml, {{"  y: {type", "  z: {type: int, min: 1, max: 3}\n  y: {type"}});
  warm = ReadWarmStart(Load(more));
  ASSERT_TRUE(warm.ok());
  EXPECT_EQ(warm->dropped.at("no value for 'z'"), 40 - outside);
}

TEST_F(WarmStartTest, RecordedOnceWithAnEventAndKeptForResumeAfterTheEarlierRunIsGone) {
  const v1::ExperimentSpec spec = Load(NewYaml("tpe", 6));
  const std::string dir = root_ + "/runs/new";
  {
    DispatchedRun run(dir, spec);
    ASSERT_TRUE(run.Open().ok());
    run.Drive(Bowl, 2);
    auto events = *run.store()->LoadEvents();
    int warm_events = 0;
    for (const EventRow& e : events) {
      if (e.kind != "warm_start") continue;
      ++warm_events;
      EXPECT_EQ(e.message, absl::StrCat("40 prior observations from 1 run (", Normal(old_),
                                        ": 40 used), of 40 completed trials"));
    }
    EXPECT_EQ(warm_events, 1);
  }
  std::filesystem::remove_all(old_);
  DispatchedRun resumed(dir, spec);
  ASSERT_TRUE(resumed.Open().ok()) << "the priors come from the run's own store now";
  auto leased = resumed.Drive(Bowl);
  EXPECT_EQ(leased.size(), 4u) << "priors are not trials: max_trials counts this run's only";
  absl::StatusOr<std::optional<WarmStart>> stored = LoadStoredWarmStart(resumed.store(), spec);
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->trials.size(), 40u);
  int warm_events = 0;
  for (const EventRow& e : *resumed.store()->LoadEvents()) warm_events += e.kind == "warm_start";
  EXPECT_EQ(warm_events, 1) << "a resume reads the recorded priors; it does not record them again";
  auto rows = *resumed.store()->LoadTrials();
  EXPECT_EQ(rows.size(), 6u) << "the priors do not appear as trials of the new run";
}

// Mean distance to the bowl's minimum of a run's first n trials.
double MeanDistance(const std::vector<google::protobuf::Map<std::string, v1::ParamValue>>& leased,
                    size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n && i < leased.size(); ++i) {
    sum += std::hypot(Num(leased[i].at("x")) - 0.3, Num(leased[i].at("y")) - 0.7);
  }
  return sum / static_cast<double>(n);
}

TEST_F(WarmStartTest, SeededModelSamplersProposeNearThePriorOptimumEarly) {
  for (const char* sampler : {"tpe", "bayesian"}) {
    SCOPED_TRACE(sampler);
    DispatchedRun warm(root_ + "/runs/warm-" + sampler, Load(NewYaml(sampler, 6)));
    DispatchedRun cold(root_ + "/runs/cold-" + sampler, Load(Yaml(sampler, 6)));
    ASSERT_TRUE(warm.Open().ok());
    ASSERT_TRUE(cold.Open().ok());
    const auto w = warm.Drive(Bowl), c = cold.Drive(Bowl);
    ASSERT_EQ(w.size(), 6u);
    // The earlier run's optimum is (0.4, 0.6), 0.14 from this one's; the cold run is still in
    // its start-up design.
    EXPECT_LT(MeanDistance(w, 6), 0.2);
    EXPECT_GT(MeanDistance(c, 6), 0.25);
  }
}

TEST_F(WarmStartTest, SequenceSamplersIgnorePriorsAndSayWhy) {
  for (const char* sampler : {"random", "sobol", "grid"}) {
    SCOPED_TRACE(sampler);
    DispatchedRun warm(root_ + "/runs/seq-warm-" + sampler, Load(NewYaml(sampler, 4)));
    DispatchedRun cold(root_ + "/runs/seq-cold-" + sampler, Load(Yaml(sampler, 4)));
    ASSERT_TRUE(warm.Open().ok());
    ASSERT_TRUE(cold.Open().ok());
    const auto w = warm.Drive(Bowl), c = cold.Drive(Bowl);
    ASSERT_EQ(w.size(), 4u);
    for (size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(w[i].at("x").number(), c[i].at("x").number());
      EXPECT_EQ(w[i].at("y").number(), c[i].at("y").number());
    }
    bool said = false;
    for (const EventRow& e : *warm.store()->LoadEvents()) {
      said |= e.kind == "warm_start" &&
              e.message.find("sampler does not learn from observations") != std::string::npos;
    }
    EXPECT_TRUE(said);
  }
}

TEST_F(WarmStartTest, SeveralObjectivesSeedNsga2WhenBothRunsShareThem) {
  const std::string two =
      "\nobjectives:\n  - {metric: loss, goal: minimize}\n  - {metric: accuracy, goal: maximize}\n";
  auto multi = [&](const std::string& yaml) {
    return absl::StrReplaceAll(yaml,
                               {{"objective: {metric: loss, goal: minimize}\n", two.substr(1)}});
  };
  MakeRun(root_ + "/runs/mo-old", SpecFromYaml(multi(Yaml("nsga2", 30))), ShiftedBowl);
  const v1::ExperimentSpec spec = Load(multi(NewYaml("nsga2", 4, "[runs/mo-old]")));
  absl::StatusOr<WarmStart> warm = ReadWarmStart(spec);
  ASSERT_TRUE(warm.ok()) << warm.status();
  ASSERT_EQ(warm->trials.size(), 30u);
  const std::vector<Observation> priors = warm->Observations(ObjectiveSet(spec));
  ASSERT_EQ(priors[0].values.size(), 2u);
  EXPECT_DOUBLE_EQ(priors[0].values[1], -warm->trials[0].values[1]) << "accuracy is maximised";
  EXPECT_DOUBLE_EQ(warm->trials[0].values[0] + warm->trials[0].values[1], 1.0);
  DispatchedRun run(root_ + "/runs/mo-new", spec);
  ASSERT_TRUE(run.Open().ok());
  EXPECT_EQ(run.Drive(Bowl).size(), 4u);
  // One objective of the earlier two is enough; one the earlier run lacks is not.
  EXPECT_TRUE(ReadWarmStart(Load(NewYaml("tpe", 4, "[runs/mo-old]"))).ok());
  EXPECT_FALSE(LoadExperimentFromString(
                   NewYaml("tpe", 4, "[runs/old]", "{metric: accuracy, goal: maximize}"),
                   root_ + "/new.yaml")
                   .ok());
}

TEST_F(WarmStartTest, ResultsAndReportShowThePriorsApartFromTheTrials) {
  const std::string dir = root_ + "/runs/shown";
  MakeRun(dir, Load(NewYaml("tpe", 5)), Bowl);
  absl::StatusOr<nlohmann::json> results = LoadResults(dir);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_TRUE(results->contains("warm_start"));
  EXPECT_EQ((*results)["warm_start"]["observations"], 40);
  EXPECT_EQ((*results)["warm_start"]["from"], nlohmann::json::array({Normal(old_)}));
  EXPECT_EQ((*results)["warm_start"]["dropped"], 0);
  EXPECT_EQ((*results)["trials"].size(), 5u);
  EXPECT_NE(ResultsToTable(*results).find(
                absl::StrCat("warm start: 40 prior observations from ", Normal(old_))),
            std::string::npos);
  EXPECT_FALSE(LoadResults(old_)->contains("warm_start"));

  absl::StatusOr<ReportData> data = LoadReportData(dir, absl::Now());
  ASSERT_TRUE(data.ok()) << data.status();
  const std::string html = RenderReportHtml(*data);
  size_t at = html.find("id=\"chart-history-trial\"");
  ASSERT_NE(at, std::string::npos);
  const std::string chart = html.substr(at, html.find("</svg>", at) - at);
  size_t priors = 0;
  for (size_t p = chart.find("prior observation (warm start)"); p != std::string::npos;
       p = chart.find("prior observation (warm start)", p + 1)) {
    ++priors;
  }
  EXPECT_EQ(priors, 40u);
  EXPECT_NE(chart.find("warm start: 40 prior observations"), std::string::npos);
  // 5 trials, the best-so-far line, 40 priors and the best prior's line.
  EXPECT_NE(chart.find("data-marks=\"47\""), std::string::npos) << chart.substr(0, 300);
}

// --- the binaries ----------------------------------------------------------------------

TEST(WarmStartCliTest, RunSeededFromAnEarlierRunAndEnqueuedConfigurationsEndToEnd) {
  const std::string root = MakeTempDir("warm-cli");
  const std::string bin = SEXTANT_BIN_DIR;
  const std::string body = R"yaml(
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
  n: {type: int, min: 1, max: 8}
trial:
  command: [python3, -c, "print('loss=%r' % ((${x} - 0.3) ** 2 + 0.01 * (${n} - 5) ** 2))"]
  timeout: 1m
)yaml";
  WriteFile(root + "/old.yaml",
            "name: old\n" + body + "search: {sampler: random, seed: 2, max_trials: 12}\n");
  WriteFile(root + "/new.yaml",
            "name: new\n" + body +
                "search:\n  sampler: tpe\n  seed: 2\n  max_trials: 3\n"
                "  enqueue: [{x: 0.3, n: 5}]\n  warm_start: {runs: [runs/old]}\n");
  auto old_run =
      RunProcess({bin + "/sextant", "run", root + "/old.yaml", "--run-dir", root + "/runs/old"});
  ASSERT_EQ(old_run.exit_code, 0) << old_run.err;
  auto new_run =
      RunProcess({bin + "/sextant", "run", root + "/new.yaml", "--run-dir", root + "/runs/new"});
  ASSERT_EQ(new_run.exit_code, 0) << new_run.err;
  auto json = RunProcess({bin + "/sextant", "results", root + "/runs/new", "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  nlohmann::json doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["warm_start"]["observations"], 12);
  EXPECT_EQ(doc["warm_start"]["from"], nlohmann::json::array({Normal(root + "/runs/old")}));
  ASSERT_EQ(doc["trials"].size(), 3u);
  EXPECT_EQ(doc["trials"][0]["params"], nlohmann::json::parse(R"({"x": 0.3, "n": 5})"));
  EXPECT_EQ(doc["best"]["value"], 0.0);
  auto events = RunProcess({bin + "/sextant", "events", root + "/runs/new"});
  EXPECT_NE(events.out.find("12 prior observations from 1 run"), std::string::npos) << events.out;

  // A warm start from a directory that is not there is refused before anything is written.
  WriteFile(root + "/bad.yaml",
            "name: bad\n" + body + "search:\n  warm_start: {runs: [runs/gone]}\n");
  auto bad =
      RunProcess({bin + "/sextant", "run", root + "/bad.yaml", "--run-dir", root + "/runs/bad"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find(root + "/bad.yaml:11:23: search.warm_start.runs[0]: run directory " +
                         root + "/runs/gone does not exist"),
            std::string::npos)
      << bad.err;
  EXPECT_FALSE(std::filesystem::exists(root + "/runs/bad"));
}

}  // namespace
}  // namespace sextant
