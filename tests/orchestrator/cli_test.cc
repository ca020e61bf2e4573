// End-to-end tests of the sextant and sextant-worker binaries: real processes, real SQLite,
// gRPC over loopback.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
const std::string kWorker = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";

// A quadratic bowl computed by awk: loss = (x - 0.3)^2 + (n - 2)^2, with one progress line.
constexpr const char* kObjective = R"(#!/bin/sh
awk -v x="$SEXTANT_PARAM_X" -v n="$1" 'BEGIN {
  printf "step=1 loss=%.9f\n", 10 + (x - 0.3) * (x - 0.3)
  printf "step=2 loss=%.9f\n", (x - 0.3) * (x - 0.3) + (n - 2) * (n - 2)
}'
)";

std::string Experiment(const std::string& name, int trials, int concurrent,
                       const std::string& command, const std::string& extra = "") {
  return absl::StrCat("name: ", name, R"(
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
  n: {type: int, min: 0, max: 4}
search: {sampler: sobol, seed: 5, max_trials: )",
                      trials, ", max_concurrent: ", concurrent, R"(}
trial:
  command: )",
                      command, "\n", extra);
}

nlohmann::json Results(const std::string& run_dir) {
  auto r = RunProcess({kSextant, "results", run_dir, "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("cli");
    WriteFile(dir_ + "/objective.sh", kObjective);
  }
  std::string dir_;
};

TEST_F(CliTest, ThreeWorkersOverLoopbackFindTheRealObjective) {
  WriteFile(dir_ + "/exp.yaml", Experiment("bowl", 12, 3, R"([sh, objective.sh, "${n}"])"));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("12/12 trials"));
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_EQ(j["experiment"], "bowl");
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(j["objective"]["metric"], "loss");
  EXPECT_EQ(j["objective"]["goal"], "minimize");
  ASSERT_EQ(j["trials"].size(), 12u);
  double best = 1e300;
  int64_t best_id = 0;
  for (const auto& t : j["trials"]) {
    ASSERT_EQ(t["state"], "COMPLETED") << t.dump();
    double x = t["params"]["x"], n = t["params"]["n"];
    double expected = (x - 0.3) * (x - 0.3) + (n - 2) * (n - 2);
    EXPECT_NEAR(t["value"].get<double>(), expected, 1e-6) << t.dump();
    EXPECT_EQ(t["metrics"]["step"], 2);
    EXPECT_EQ(t["attempts"], 1);
    EXPECT_TRUE(t["params"]["n"].is_number_integer());
    EXPECT_EQ(t["cost"], 0.0);
    if (t["value"].get<double>() < best) {
      best = t["value"];
      best_id = t["id"];
    }
  }
  EXPECT_EQ(j["best"]["trial"], best_id);
  EXPECT_EQ(j["best"]["value"], best);
  EXPECT_EQ(j["cost"]["currency"], "USD");
  // Every trial's output was captured in the run directory.
  EXPECT_THAT(ReadFile(dir_ + "/run/logs/trial-1.1.out"), HasSubstr("step=2 loss="));
}

TEST_F(CliTest, KilledWorkerTrialCompletesOnAnotherWorkerWithTwoAttempts) {
  // Trial 1's first attempt records its worker (the parent of sh) and hangs; later attempts
  // and other trials finish at once.
  WriteFile(dir_ + "/hang.sh", absl::StrCat(R"(#!/bin/sh
if [ "$SEXTANT_TRIAL_ID" = 1 ] && [ "$SEXTANT_ATTEMPT" = 1 ]; then
  echo "$$ $PPID" > ")",
                                            dir_, R"(/victim"
  sleep 60
fi
echo "loss=$SEXTANT_TRIAL_ID"
)"));
  WriteFile(dir_ + "/exp.yaml", Experiment("kill", 4, 2, "[sh, hang.sh]"));
  BackgroundProcess run({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run",
                         "--lease-timeout", "2s", "--heartbeat", "0.5s"});
  ASSERT_TRUE(testing::WaitFor([&] { return std::filesystem::exists(dir_ + "/victim"); }, 30))
      << run.out() << run.err();
  std::ifstream victim(dir_ + "/victim");
  int trial_pid = 0, worker_pid = 0;
  victim >> trial_pid >> worker_pid;
  ASSERT_GT(worker_pid, 1);
  ASSERT_EQ(kill(worker_pid, SIGKILL), 0);
  ASSERT_EQ(run.Wait(60), 0) << run.out() << run.err();
  kill(-trial_pid, SIGKILL);  // the orphaned sleep of the dead worker
  nlohmann::json j = Results(dir_ + "/run");
  ASSERT_EQ(j["trials"].size(), 4u);
  EXPECT_EQ(j["trials"][0]["state"], "COMPLETED");
  EXPECT_EQ(j["trials"][0]["attempts"], 2);
  EXPECT_EQ(j["trials"][0]["value"], 1.0);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(j["trials"][i]["attempts"], 1);
  auto events = RunProcess({kSextant, "events", dir_ + "/run"});
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"lease_expired\""));
}

TEST_F(CliTest, PreemptionNoticeCheckpointsRequeuesAndResumesToTheExactTarget) {
  // Ten steps with a checkpoint after each; on SIGTERM the script saves and exits 75. Trial 1's
  // first attempt records its worker so that the test can deliver the notice to it.
  WriteFile(dir_ + "/steps.sh", absl::StrCat(R"SH(#!/bin/sh
ck="$SEXTANT_CHECKPOINT_DIR/step"
i=0
[ -f "$ck" ] && i=$(cat "$ck")
trap 'echo "$i" > "$ck"; echo "sextant-event: checkpoint saved at step $i"; exit 75' TERM
if [ "$SEXTANT_TRIAL_ID" = 1 ] && [ "$SEXTANT_ATTEMPT" = 1 ]; then echo "$$ $PPID" > ")SH",
                                             dir_, R"SH(/victim"; fi
while [ "$i" -lt 10 ]; do
  i=$((i + 1))
  echo "$i" > "$ck"
  echo "step=$i loss=$((100 - i))"
  if [ "$SEXTANT_TRIAL_ID" = 1 ] && [ "$SEXTANT_ATTEMPT" = 1 ] && [ "$i" -ge 3 ]; then
    sleep 0.2 & wait $!
  fi
done
)SH"));
  WriteFile(dir_ + "/exp.yaml", Experiment("preempt", 3, 2, "[sh, steps.sh]"));
  BackgroundProcess run(
      {kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run", "--heartbeat", "0.3s"});
  int trial_pid = 0, worker_pid = 0;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        std::ifstream victim(dir_ + "/victim");
        return victim >> trial_pid >> worker_pid && worker_pid > 1;
      },
      30))
      << run.out() << run.err();
  // Let it get into the slow part (a few heartbeats), then deliver the notice.
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        return ReadFile(dir_ + "/run/logs/trial-1.1.out").find("step=6") != std::string::npos;
      },
      30));
  ASSERT_EQ(kill(worker_pid, SIGTERM), 0);
  ASSERT_EQ(run.Wait(60), 0) << run.out() << run.err();
  nlohmann::json j = Results(dir_ + "/run");
  ASSERT_EQ(j["trials"].size(), 3u);
  const auto& t = j["trials"][0];
  EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
  EXPECT_EQ(t["attempts"], 2);
  EXPECT_EQ(t["preemptions"], 1);
  EXPECT_EQ(t["value"], 90.0);  // step 10 reached exactly once overall
  EXPECT_EQ(t["metrics"]["step"], 10.0);
  // The second attempt resumed from the checkpoint instead of starting over at step 1.
  std::string second = ReadFile(dir_ + "/run/logs/trial-1.2.out");
  EXPECT_THAT(second, ::testing::Not(HasSubstr("step=1 ")));
  EXPECT_THAT(second, HasSubstr("step=10 "));
  EXPECT_EQ(j["trials"][1]["preemptions"], 0);
  auto events = RunProcess({kSextant, "events", dir_ + "/run"});
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"trial_preempted\""));
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"trial_checkpoint\""));
  EXPECT_THAT(events.out, HasSubstr("saved at step"));
  // A preemption is not a failure: no trial_failed or trial_restarted event.
  EXPECT_THAT(events.out, ::testing::Not(HasSubstr("trial_restarted")));
  // Heartbeats carried the trials' CPU and memory; status shows them per worker.
  auto status = RunProcess({kSextant, "status", dir_ + "/run"});
  EXPECT_THAT(status.out, HasSubstr("workers:"));
  EXPECT_THAT(status.out, HasSubstr("rss"));
}

TEST_F(CliTest, BuiltinTrainerRunsUnderAshaAndResumesFromItsCheckpoints) {
  // sextant-worker train on a small synthetic set: rungs at epochs 1 and 3, promoted trials
  // continue from the checkpoint of their previous rung. One trial runs under a memory cap
  // that forces micro-batch halving, which must show in its events.
  WriteFile(dir_ + "/exp.yaml", R"(name: builtin
objective: {metric: val_accuracy, goal: maximize}
parameters:
  lr: {type: float, min: 1.0e-3, max: 1.0e-2, log: true}
  memory_cap_mb: {type: categorical, values: ["0", "1"]}
search:
  sampler: grid
  scheduler: asha
  fidelity: {name: epoch, min: 1, max: 3, reduction_factor: 3}
  max_trials: 6
  max_concurrent: 2
trial:
  builtin:
    model: mlp
    dataset: synthetic
    epochs: 3
    args: {hidden: "64", batch_size: "128", threads: "1", train_subset: "1280", val_subset: "128"}
  timeout: 5m
)");
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = Results(dir_ + "/run");
  ASSERT_FALSE(j["trials"].empty());
  int completed = 0;
  bool saw_oom = false;
  for (const auto& t : j["trials"]) {
    ASSERT_TRUE(t["state"] == "COMPLETED" || t["state"] == "PRUNED") << t.dump();
    EXPECT_TRUE(t["metrics"].contains("train_loss")) << t.dump();
    EXPECT_TRUE(t["metrics"].contains("samples_per_sec")) << t.dump();
    EXPECT_EQ(t["restarts_from_scratch"], 0) << t.dump();
    if (t["state"] == "COMPLETED") {
      ++completed;
      EXPECT_EQ(t["fidelity"], 3) << t.dump();
      EXPECT_GT(t["value"].get<double>(), 0.5) << t.dump();  // 10 classes: chance is 0.1
      EXPECT_GE(t["attempts"].get<int>(), 2) << t.dump();    // paused at epoch 1, promoted
    }
    for (const auto& e : t["events"]) saw_oom = saw_oom || e["kind"] == "trial_oom";
  }
  EXPECT_GE(completed, 1);
  EXPECT_TRUE(saw_oom) << j.dump();
  // A promoted attempt resumed: it trained epochs 2 and 3 only.
  auto completed_it = std::find_if(j["trials"].begin(), j["trials"].end(),
                                   [](const auto& t) { return t["state"] == "COMPLETED"; });
  ASSERT_NE(completed_it, j["trials"].end());
  int id = (*completed_it)["id"];
  std::string last = ReadFile(absl::StrCat(dir_, "/run/logs/trial-", id, ".",
                                           (*completed_it)["attempts"].get<int>(), ".out"));
  EXPECT_THAT(last, ::testing::Not(HasSubstr("epoch=1 ")));
  EXPECT_THAT(last, HasSubstr("epoch=3 "));
}

TEST_F(CliTest, EveryExampleValidates) {
  int count = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(
           std::string(SEXTANT_SOURCE_DIR) + "/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    // A price catalog (*-catalog.yaml) is checked through the experiment that names it.
    if (entry.path().stem().string().ends_with("-catalog")) continue;
    // An example whose data and model files a script writes first (prepare_data.py) is
    // validated by its own test once they are there (federated_own_data_example_test).
    if (std::filesystem::exists(entry.path().parent_path() / "prepare_data.py")) continue;
    auto r = RunProcess({kSextant, "validate", entry.path().string()});
    EXPECT_EQ(r.exit_code, 0) << entry.path() << ": " << r.err;
    ++count;
  }
  EXPECT_GE(count, 3);
}

// What copying an example out of the checkout did before its scripts sat in its own folder:
// `../asha/train.sh` is not there, every trial would fail, and validate says so (exit 0).
TEST_F(CliTest, ValidateWarnsWhenTheScriptATrialCommandRunsIsMissing) {
  const std::string copy = dir_ + "/spot-budget";
  std::filesystem::create_directories(copy);
  const std::string old_yaml = absl::StrReplaceAll(
      ReadFile(std::string(SEXTANT_SOURCE_DIR) + "/examples/spot-budget/experiment.yaml"),
      {{"command: [sh, train.sh]", "command: [sh, ../asha/train.sh]"}});
  ASSERT_THAT(old_yaml, HasSubstr("../asha/train.sh"));
  WriteFile(copy + "/experiment.yaml", old_yaml);
  WriteFile(copy + "/demo-catalog.yaml",
            ReadFile(std::string(SEXTANT_SOURCE_DIR) + "/examples/spot-budget/demo-catalog.yaml"));
  auto r = RunProcess({kSextant, "validate", copy + "/experiment.yaml"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(": ok ("));
  EXPECT_THAT(r.err, HasSubstr(copy +
                               "/experiment.yaml: warning: trial.command: "
                               "../asha/train.sh does not exist in " +
                               copy + " (the trial's working directory"));

  // The script is the first argument that looks like a file, resolved in working_dir.
  struct Case {
    std::string command, extra;
    bool warns;
  };
  WriteFile(dir_ + "/here.py", "print('loss=1')\n");
  std::filesystem::create_directories(dir_ + "/code");
  WriteFile(dir_ + "/code/train.sh", "echo loss=1\n");
  for (const Case& c : std::vector<Case>{
           {"[python3, train.py, --lr, \"${x}\"]", "", true},
           {"[./train.sh]", "", true},
           {"[/usr/bin/python3, missing/train.py]", "", true},
           {"[python3, here.py, --out, results/x.json]", "", false},
           {"[/usr/bin/python3, here.py]", "", false},
           {"[sh, train.sh]", "  working_dir: code\n", false},
           {"[sh, train.sh]", "", true},
           {"[/usr/bin/python3, -c, \"print('loss=1')\"]", "", false},
           {"[sh, -c, \"echo loss=1\"]", "", false},
           {"[echo, \"loss=${x}\"]", "", false},
       }) {
    WriteFile(dir_ + "/case.yaml", Experiment("case", 2, 1, c.command, c.extra));
    auto v = RunProcess({kSextant, "validate", dir_ + "/case.yaml"});
    EXPECT_EQ(v.exit_code, 0) << c.command << ": " << v.err;
    EXPECT_EQ(v.err.find("warning: trial.command") != std::string::npos, c.warns)
        << c.command << c.extra << ": " << v.err;
  }
}

// Every example folder, copied out of the checkout on its own, validates without a warning:
// the scripts its commands run are in it.
TEST_F(CliTest, EveryExampleCopiedOutOfTheCheckoutValidatesWithoutWarnings) {
  const std::filesystem::path examples = std::string(SEXTANT_SOURCE_DIR) + "/examples";
  std::filesystem::create_directories(dir_ + "/copies");
  int count = 0;
  for (const auto& folder : std::filesystem::directory_iterator(examples)) {
    if (!folder.is_directory()) continue;
    const std::filesystem::path copy = dir_ + "/copies/" + folder.path().filename().string();
    std::filesystem::copy(folder.path(), copy, std::filesystem::copy_options::recursive);
    for (const auto& entry : std::filesystem::recursive_directory_iterator(copy)) {
      if (entry.path().extension() != ".yaml") continue;
      if (entry.path().stem().string().ends_with("-catalog")) continue;
      if (std::filesystem::exists(entry.path().parent_path() / "prepare_data.py")) continue;
      auto r = RunProcess({kSextant, "validate", entry.path().string()});
      EXPECT_EQ(r.exit_code, 0) << entry.path() << ": " << r.err;
      EXPECT_THAT(r.err, ::testing::Not(HasSubstr("warning"))) << entry.path();
      ++count;
    }
  }
  EXPECT_GE(count, 10);
}

// The examples' copies of a shared script or helper are the same bytes as the original, so a
// fix to one reaches every folder.
TEST_F(CliTest, ExampleCopiesOfSharedFilesMatchTheirOriginals) {
  const std::string root = SEXTANT_SOURCE_DIR;
  const std::vector<std::pair<std::string, std::vector<std::string>>> copies = {
      {"examples/asha/train.sh", {"examples/bohb/train.sh", "examples/spot-budget/train.sh"}},
      {"examples/mixed/objective.sh", {"examples/grid/objective.sh"}},
      {"examples/quickstart/branin.py", {"examples/bayesian/branin.py"}},
      {"clients/python/sextant/model_file.py",
       {"examples/federated/pytorch-client/model_file.py",
        "examples/federated/pytorch-own-model/model_file.py"}},
  };
  for (const auto& [original, duplicates] : copies) {
    const std::string want = ReadFile(root + "/" + original);
    ASSERT_FALSE(want.empty()) << original;
    for (const std::string& d : duplicates) {
      EXPECT_TRUE(ReadFile(root + "/" + d) == want) << d << " differs from " << original;
    }
  }
}

// A self-contained example runs from a copy out of the checkout. Its end-of-run table, cut to
// 10 of its 16 trials, names the real run directory, and no debug line comes with it.
TEST_F(CliTest, AnExampleCopiedOutOfTheCheckoutRuns) {
  const std::string copy = dir_ + "/grid";
  std::filesystem::copy(std::string(SEXTANT_SOURCE_DIR) + "/examples/grid", copy,
                        std::filesystem::copy_options::recursive);
  auto v = RunProcess({kSextant, "validate", copy + "/experiment.yaml"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.err, "");
  const std::string run_dir = dir_ + "/grid-run";
  auto r = RunProcess(
      {"sh", "-c", "cd " + copy + " && " + kSextant + " run experiment.yaml --run-dir " + run_dir},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = Results(run_dir);
  ASSERT_EQ(j["trials"].size(), 16u);
  for (const auto& t : j["trials"]) EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
  EXPECT_THAT(r.out, HasSubstr("... 6 more (sextant results " + run_dir + " shows them all)"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("DIR")));
  EXPECT_THAT(r.out + r.err, ::testing::Not(HasSubstr("orchestrator cpu")));
  // The figure stays in the store for the benchmarks that read it.
  auto cpu = testing::QueryRows(run_dir + "/state.db",
                                "SELECT value FROM meta WHERE key = 'orchestrator_cpu_seconds'");
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_GT(std::stod(cpu[0][0]), 0);
}

// examples/simulate: $150 does not pay for its 300 ASHA trials. No spot instance was taken back,
// so no work is called lost; the work the budget's stop handed back is counted on its own, and
// the end says which trials did not finish and what the whole search would have cost.
TEST_F(CliTest, SimulateSaysWhatABudgetEndLeftUndoneAndWhatAllTrialsWouldCost) {
  auto r = RunProcess({kSextant, "simulate",
                       std::string(SEXTANT_SOURCE_DIR) + "/examples/simulate/experiment.yaml",
                       "--run-dir", dir_ + "/sim"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(
          R"(preemptions: (\d+) \(\d+ spot interruptions; (\d+) instance-seconds of work redone\))")))
      << r.out;
  if (m[1] == "0") {
    EXPECT_EQ(m[2], "0") << "no preemption, no work redone";
  }
  nlohmann::json j = Results(dir_ + "/sim");
  ASSERT_EQ(j["state"], "BUDGET_EXHAUSTED");
  int finished = 0;
  for (const auto& t : j["trials"]) {
    finished += t["state"] == "COMPLETED" || t["state"] == "PRUNED" || t["state"] == "FAILED";
  }
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(R"(not finished: (\d+) of the 300 trials \((\d+) paused at a rung, (\d+) cut off )"
                 R"(by the run's end, (\d+) never started; (\d+) instance-seconds of work handed )"
                 R"(back at the end\))")))
      << r.out;
  EXPECT_EQ(std::stoi(m[1]), 300 - finished);
  EXPECT_EQ(std::stoi(m[2]) + std::stoi(m[3]) + std::stoi(m[4]), 300 - finished);
  EXPECT_GT(std::stoi(m[5]), 0) << "the budget's stop cut running trials off";
  // 896 epochs: successive halving's budget of 300 trials from epoch 1 to 27, factor 3.
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(R"(projection:  all 300 trials would cost about ([0-9.]+) USD \(896 epoch units )"
                 R"(at ([0-9.e-]+) USD per epoch so far, (\d+) done\))")))
      << r.out;
  const double spent = j["cost"]["total"].get<double>();
  double epochs = 0;
  for (const auto& t : j["trials"])
    epochs += t["fidelity"].is_number() ? t["fidelity"].get<double>() : 0;
  EXPECT_EQ(std::stod(m[3]), epochs);
  EXPECT_NEAR(std::stod(m[1]), spent / epochs * 896, 0.01);
  EXPECT_GT(std::stod(m[1]), spent) << "the whole search costs more than the cap paid for";
}

// A plain federated run is forecast by rounds, not simulated as a search: each round's
// dollars, the pools' totals and the wall time, with what-ifs for a region's market and the
// global region. Nothing is stored.
TEST_F(CliTest, SimulateForecastsAPlainFederatedRunAndItsWhatIfs) {
  const std::string exp =
      std::string(SEXTANT_SOURCE_DIR) + "/examples/federated/billed-regions/fedavg-billed.yaml";
  auto total = [](const std::string& out) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(out, m, std::regex(R"(cost: +([0-9.]+) USD)"))) << out;
    return m.empty() ? -1.0 : std::stod(m[1]);
  };
  auto r = RunProcess({kSextant, "simulate", exp, "--run-dir", dir_ + "/fl-sim"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("50890 parameters, 10 rounds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    10  "), std::string::npos) << r.out;  // a line per round
  EXPECT_NE(r.out.find("pool us-gpu-spot"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/fl-sim"));
  const double base = total(r.out);
  auto spot = RunProcess({kSextant, "simulate", exp, "--market", "eu-west-1=spot"});
  ASSERT_EQ(spot.exit_code, 0) << spot.err;
  EXPECT_LT(total(spot.out), base);
  auto moved = RunProcess({kSextant, "simulate", exp, "--global-region", "eu-west-1"});
  ASSERT_EQ(moved.exit_code, 0) << moved.err;
  EXPECT_NE(moved.out.find("global region eu-west-1"), std::string::npos) << moved.out;
  auto bad = RunProcess({kSextant, "simulate", exp, "--market", "mars-1=spot"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("no pool is in region mars-1"), std::string::npos) << bad.err;
  auto typo = RunProcess({kSextant, "simulate", exp, "--market", "eu-west-1=cheap"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("--market takes REGION=spot or REGION=on_demand"), std::string::npos)
      << typo.err;
  auto no_run = RunProcess({kSextant, "simulate", exp, "--calibrate", dir_ + "/no-such-run"});
  EXPECT_EQ(no_run.exit_code, 2);
  EXPECT_NE(no_run.err.find("--calibrate " + dir_ + "/no-such-run: no run state"),
            std::string::npos)
      << no_run.err;
  // What-ifs of a federated forecast are refused for a search, never ignored.
  auto search = RunProcess({kSextant, "simulate",
                            std::string(SEXTANT_SOURCE_DIR) + "/examples/simulate/experiment.yaml",
                            "--calibrate", dir_ + "/no-such-run"});
  EXPECT_EQ(search.exit_code, 2);
  EXPECT_NE(search.err.find("--calibrate applies to a plain federated run's forecast"),
            std::string::npos)
      << search.err;
}

// The workers' last heartbeats named the trials they ran; once the run has ended, status does
// not show them as running those trials.
TEST_F(CliTest, StatusShowsNoWorkerRunningATrialAfterTheRunHasEnded) {
  WriteFile(dir_ + "/slow.sh", "#!/bin/sh\nsleep 1.5\necho loss=1\n");
  WriteFile(dir_ + "/exp.yaml", Experiment("ended", 8, 2, "[sh, slow.sh]"));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The last sample of each worker was taken while it ran a trial.
  auto busy =
      testing::QueryRows(dir_ + "/run/state.db",
                         "SELECT t.worker_id FROM telemetry t WHERE t.trial_id != 0 AND t.time = "
                         "(SELECT MAX(time) FROM telemetry u WHERE u.worker_id = t.worker_id)");
  ASSERT_FALSE(busy.empty()) << "no worker's last heartbeat named a trial";
  auto s = RunProcess({kSextant, "status", dir_ + "/run"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_THAT(s.out, HasSubstr("workers: none running (the run has ended: COMPLETED); their "
                               "last heartbeats:\n"));
  EXPECT_THAT(s.out, HasSubstr("rss"));  // what they used is still shown
  EXPECT_THAT(s.out, ::testing::Not(::testing::ContainsRegex("worker [0-9]+ +trial")));
  EXPECT_THAT(s.out, HasSubstr("... 3 more (sextant results " + dir_ + "/run shows them all)"));
}

TEST_F(CliTest, InvalidFileGivesFileLineColAndExitTwo) {
  WriteFile(dir_ + "/bad.yaml", R"(name: bad
objective: {metric: loss}
parameters:
  x: {type: float, min: 2, max: 1}
search: {sampler: annealing}
trial:
  command: [echo, "${y}"]
)");
  auto r = RunProcess({kSextant, "validate", dir_ + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(dir_ + "/bad.yaml:4:"));
  EXPECT_THAT(r.err, HasSubstr(dir_ + "/bad.yaml:5:"));
  EXPECT_THAT(r.err, HasSubstr(dir_ + "/bad.yaml:7:"));
  auto run = RunProcess({kSextant, "run", dir_ + "/bad.yaml", "--run-dir", dir_ + "/run"});
  EXPECT_EQ(run.exit_code, 2);
  WriteFile(dir_ + "/malformed.yaml", "name: [unclosed\n");
  auto m = RunProcess({kSextant, "validate", dir_ + "/malformed.yaml"});
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_THAT(m.err, HasSubstr(dir_ + "/malformed.yaml:"));
}

// What an Optuna user writes first: Optuna's key names, a fractional int bound, British
// spelling and Sextant's trial id in the command. Each gets one error that says what to write.
TEST_F(CliTest, ValidateAnswersOptunaHabitsWithOurNames) {
  WriteFile(dir_ + "/habits.yaml", R"(name: habits
objective: {metric: acc, direction: maximise}
parameters:
  lr: {type: float, low: 0.001, high: 0.1}
  act: {type: categorical, choices: [relu, tanh]}
  n_layers: {type: int, min: 1, max: 6.5}
search:
  n_trials: 20
  enqueue: [{lr: 0.01, act: relu, n_layers: 3}]
trial:
  command: [sh, objective.sh, "--id=${SEXTANT_TRIAL_ID}"]
)");
  auto r = RunProcess({kSextant, "validate", dir_ + "/habits.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  const std::string file = dir_ + "/habits.yaml:";
  EXPECT_THAT(r.err, HasSubstr(file + "2:26: objective.direction: unknown key; allowed keys: "
                                      "metric, goal, target (did you mean 'goal'?)"));
  EXPECT_THAT(r.err, HasSubstr("parameters.lr.low: unknown key; allowed keys: type, min, max, "
                               "step, log, values, grid_points, when (did you mean 'min'?)"));
  EXPECT_THAT(r.err, HasSubstr("(did you mean 'max'?)"));
  EXPECT_THAT(r.err, HasSubstr("(did you mean 'values'?)"));
  EXPECT_THAT(r.err, HasSubstr("search.n_trials: unknown key"));
  EXPECT_THAT(r.err, HasSubstr("(did you mean 'max_trials'?)"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("did you mean 'log'")));
  EXPECT_THAT(r.err,
              HasSubstr(file + "6:38: parameters.n_layers.max: must be an integer, got 6.5"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("above max")));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("search.enqueue")));
  EXPECT_THAT(r.err, HasSubstr("'${SEXTANT_TRIAL_ID}' names no parameter (${...} takes "
                               "parameters only)"));
  EXPECT_THAT(r.err, HasSubstr("in the trial's environment"));

  // Fixed as the messages say, with the goal still in British spelling, it runs.
  WriteFile(dir_ + "/fixed.yaml", R"(name: habits
objective: {metric: loss, goal: minimise}
parameters:
  x: {type: float, min: 0, max: 1}
search: {max_trials: 4}
trial:
  command: [sh, -c, 'sh objective.sh "$SEXTANT_TRIAL_ID"']
)");
  auto v = RunProcess({kSextant, "validate", dir_ + "/fixed.yaml"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  auto run = RunProcess({kSextant, "run", dir_ + "/fixed.yaml", "--run-dir", dir_ + "/run"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_EQ(j["objective"]["goal"], "minimize");
  ASSERT_FALSE(j["trials"].empty());
  for (const auto& t : j["trials"]) {
    // objective.sh's n is $1: here the trial's id, read from the environment by the shell.
    const double x = t["params"]["x"], n = t["id"];
    EXPECT_NEAR(t["value"].get<double>(), (x - 0.3) * (x - 0.3) + (n - 2) * (n - 2), 1e-6);
  }
}

// `step:` holds in a real run: every trial the sampler proposes lies on min + k * step.
TEST_F(CliTest, SteppedParametersStayOnTheirGridInARun) {
  WriteFile(dir_ + "/stepped.yaml", R"(name: stepped
objective: {metric: loss}
parameters:
  x: {type: float, min: -1, max: 1, step: 0.25}
  n: {type: int, min: 0, max: 4, step: 3}
search: {sampler: tpe, initial_design: 4, seed: 5, max_trials: 12, max_concurrent: 2}
trial:
  command: [sh, objective.sh, "${n}"]
)");
  auto run = RunProcess({kSextant, "run", dir_ + "/stepped.yaml", "--run-dir", dir_ + "/run"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  nlohmann::json j = Results(dir_ + "/run");
  ASSERT_EQ(j["trials"].size(), 12u);
  std::set<int64_t> ns;
  for (const auto& t : j["trials"]) {
    EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
    const double x = t["params"]["x"];
    const int64_t n = t["params"]["n"];
    EXPECT_EQ(x * 4, std::round(x * 4)) << t.dump();
    EXPECT_TRUE(n == 0 || n == 3) << t.dump();
    ns.insert(n);
  }
  EXPECT_EQ(ns.size(), 2u);
}

TEST_F(CliTest, SecondRunOnALiveRunDirectoryIsRefused) {
  WriteFile(dir_ + "/slow.sh", "#!/bin/sh\nsleep 2\necho loss=1\n");
  WriteFile(dir_ + "/exp.yaml", Experiment("busy", 2, 1, "[sh, slow.sh]"));
  BackgroundProcess first({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  ASSERT_TRUE(first.WaitForOutput("listening on", 30)) << first.err();
  auto second = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_THAT(second.err, HasSubstr("is in use by another sextant process"));
  EXPECT_EQ(first.Wait(60), 0) << first.err();
  auto third = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  EXPECT_EQ(third.exit_code, 2);
  EXPECT_THAT(third.err, HasSubstr("sextant resume"));
}

TEST_F(CliTest, SigintCancelsRunningTrialsAndResumeFinishesThem) {
  WriteFile(dir_ + "/slow.sh", "#!/bin/sh\nsleep 1\necho loss=$SEXTANT_TRIAL_ID\n");
  WriteFile(dir_ + "/exp.yaml", Experiment("stop", 6, 2, "[sh, slow.sh]"));
  BackgroundProcess run({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  ASSERT_TRUE(run.WaitForOutput("listening on", 30)) << run.err();
  ASSERT_TRUE(testing::WaitFor(
      [&] { return std::filesystem::exists(dir_ + "/run/logs/trial-1.1.out"); }, 30));
  run.Signal(SIGINT);
  EXPECT_EQ(run.Wait(30), 130) << run.out() << run.err();
  EXPECT_THAT(run.out(), HasSubstr("sextant resume"));
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_EQ(j["state"], "INTERRUPTED");
  int cancelled = 0;
  for (const auto& t : j["trials"]) cancelled += t["state"] == "CANCELLED";
  EXPECT_GE(cancelled, 1);

  auto resumed = RunProcess({kSextant, "resume", dir_ + "/run"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  j = Results(dir_ + "/run");
  EXPECT_EQ(j["state"], "COMPLETED");
  ASSERT_EQ(j["trials"].size(), 6u);
  for (const auto& t : j["trials"]) {
    EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
    EXPECT_EQ(t["value"], t["id"]);  // the same ids, resumed
  }
}

TEST_F(CliTest, BadTrialsFailWithReasonsAndNothingIsLost) {
  // Trial 1: command not found. 2: garbage and a 2 MiB line without newline, then a result.
  // 3: NaN objective. 4: exit 3 with a message on stderr. 5: fine.
  WriteFile(dir_ + "/bad.sh", R"(#!/bin/sh
case "$SEXTANT_TRIAL_ID" in
  2) head -c 300 /dev/urandom; head -c 2097152 /dev/zero | tr '\0' 'a'; echo; echo "loss=2" ;;
  3) echo "loss=nan" ;;
  4) echo "loss=4"; echo "out of cheese" >&2; exit 3 ;;
  *) echo "loss=$SEXTANT_TRIAL_ID" ;;
esac
)");
  WriteFile(dir_ + "/exp.yaml", Experiment("bad", 5, 1, R"([sh, bad.sh])"));
  // Trial 1 runs a command that does not exist: point its argv at a missing program.
  std::string yaml = ReadFile(dir_ + "/exp.yaml");
  WriteFile(dir_ + "/exp.yaml", yaml);
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = Results(dir_ + "/run");
  ASSERT_EQ(j["trials"].size(), 5u);
  EXPECT_EQ(j["trials"][1]["state"], "COMPLETED");
  EXPECT_EQ(j["trials"][1]["value"], 2.0);
  EXPECT_EQ(j["trials"][2]["state"], "FAILED");
  EXPECT_THAT(j["trials"][2]["error"].get<std::string>(), HasSubstr("'loss' is nan"));
  EXPECT_EQ(j["trials"][2]["metrics"]["loss"], "nan");
  EXPECT_EQ(j["trials"][3]["state"], "FAILED");
  EXPECT_THAT(j["trials"][3]["error"].get<std::string>(), HasSubstr("exited with status 3"));
  EXPECT_THAT(j["trials"][3]["error"].get<std::string>(), HasSubstr("out of cheese"));
  EXPECT_EQ(j["trials"][3]["metrics"]["loss"], 4.0);  // reported before it failed: kept
  EXPECT_EQ(j["trials"][4]["state"], "COMPLETED");
  EXPECT_EQ(j["best"]["trial"], 1);

  // Its only trial failing, the run fails too (exit 1), and says why.
  WriteFile(dir_ + "/missing.yaml", Experiment("missing", 1, 1, "[no-such-command-xyz, a]"));
  r = RunProcess({kSextant, "run", dir_ + "/missing.yaml", "--run-dir", dir_ + "/run2"});
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("every trial failed (1 of 1)"));
  j = Results(dir_ + "/run2");
  EXPECT_EQ(j["trials"][0]["state"], "FAILED");
  EXPECT_THAT(j["trials"][0]["error"].get<std::string>(),
              HasSubstr("command not found: no-such-command-xyz"));
  EXPECT_TRUE(j["best"].is_null());
}

TEST_F(CliTest, WorkerWithAnotherProtocolVersionIsRefused) {
  WriteFile(dir_ + "/slow.sh", "#!/bin/sh\nsleep 3\necho loss=1\n");
  WriteFile(dir_ + "/exp.yaml", Experiment("proto", 1, 1, "[sh, slow.sh]"));
  BackgroundProcess run({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  ASSERT_TRUE(run.WaitForOutput("listening on", 30)) << run.err();
  std::string out = run.out();
  size_t at = out.find("listening on ") + 13;
  std::string target = out.substr(at, out.find(')', at) - at);
  auto w = RunProcess({kWorker, "--connect", target, "--protocol-version", "99", "--secret-file",
                       dir_ + "/run/secrets/worker.secret"});
  EXPECT_EQ(w.exit_code, 2);
  EXPECT_THAT(w.err, HasSubstr("protocol version 99"));
  EXPECT_EQ(run.Wait(60), 0);
}

TEST_F(CliTest, ResultsComeAsCsvAndTable) {
  WriteFile(dir_ + "/exp.yaml", Experiment("fmt", 3, 1, R"([sh, objective.sh, "${n}"])"));
  ASSERT_EQ(RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"}).exit_code,
            0);
  auto csv = RunProcess({kSextant, "results", dir_ + "/run", "--format", "csv"});
  EXPECT_EQ(csv.exit_code, 0);
  EXPECT_THAT(
      csv.out,
      HasSubstr("id,state,value,attempts,fidelity,cost,feasible,param.n,param.x,metric.loss"));
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 4);
  auto table = RunProcess({kSextant, "results", dir_ + "/run"});
  EXPECT_THAT(table.out, HasSubstr("best: trial"));
  auto status = RunProcess({kSextant, "status", dir_ + "/run"});
  EXPECT_EQ(status.exit_code, 0);
  EXPECT_THAT(status.out, HasSubstr("COMPLETED"));
  auto missing = RunProcess({kSextant, "results", dir_ + "/nope"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("not a Sextant run directory"));
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

TEST_F(CliTest, ProgressLineIsRedrawnInPlaceOnATerminal) {
  SEXTANT_REQUIRE_COMPONENT(access("/usr/bin/script", X_OK) == 0,
                            "util-linux script(1) is not installed");
  WriteFile(dir_ + "/exp.yaml", Experiment("tty", 4, 2, R"([sh, objective.sh, "${n}"])"));
  // script(1) gives sextant a pseudo-terminal as stdout and copies what it draws to a file.
  std::string typescript = dir_ + "/typescript";
  auto r =
      RunProcess({"/usr/bin/script", "-qfec",
                  kSextant + " run " + dir_ + "/exp.yaml --run-dir " + dir_ + "/run", typescript});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::string screen = ReadFile(typescript);
  EXPECT_THAT(screen, HasSubstr("\r\033[K["));  // redrawn in place
  EXPECT_THAT(screen, HasSubstr("[####################] 4/4 trials"));
  EXPECT_THAT(screen, HasSubstr("best loss="));
  // Without a terminal the same run prints plain lines, with no control characters.
  auto plain = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run2"});
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(plain.out.find('\033'), std::string::npos);
  EXPECT_THAT(plain.out, HasSubstr("4/4 trials"));
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

// Runs examples/asha (27 trials, rungs 1, 3, 9, 27); returns the results document.
nlohmann::json RunAsha(const std::string& dir, const std::string& extra_arg, int* exit_code) {
  std::string yaml = ReadFile(std::string(SEXTANT_SOURCE_DIR) + "/examples/asha/experiment.yaml");
  if (!extra_arg.empty()) {
    size_t at = yaml.find("[sh, train.sh]");
    yaml.replace(at, 14, "[sh, train.sh, " + extra_arg + "]");
  }
  yaml += "  working_dir: " + std::string(SEXTANT_SOURCE_DIR) + "/examples/asha\n";
  WriteFile(dir + "/asha.yaml", yaml);
  auto r = RunProcess({kSextant, "run", dir + "/asha.yaml", "--run-dir", dir + "/run"});
  *exit_code = r.exit_code;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  return Results(dir + "/run");
}

TEST_F(CliTest, AshaPromotionResumesFromCheckpointsAndCountsEpochsTrained) {
  int rc = 0;
  nlohmann::json j = RunAsha(dir_, "", &rc);
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(j["trials"].size(), 27u);
  double sum_reached = 0;
  int completed = 0, pruned = 0;
  for (const auto& t : j["trials"]) {
    sum_reached += t["fidelity"].get<double>();
    completed += t["state"] == "COMPLETED";
    pruned += t["state"] == "PRUNED";
    EXPECT_EQ(t["restarts_from_scratch"], 0) << t.dump();
    ASSERT_TRUE(t["rungs"].is_array());
    if (t["state"] == "COMPLETED") {
      EXPECT_EQ(t["fidelity"], 27) << t.dump();
    }
    // Each attempt continued where the last one stopped: the epochs across the trial's logs
    // are 1, 2, 3, ... with no repeats.
    std::string all;
    for (int a = 1; a <= t["attempts"].get<int>(); ++a) {
      all += ReadFile(absl::StrCat(dir_, "/run/logs/trial-", t["id"].get<int>(), ".", a, ".out"));
    }
    int expect = 1;
    for (size_t p = all.find("epoch="); p != std::string::npos; p = all.find("epoch=", p + 1)) {
      EXPECT_EQ(std::atoi(all.c_str() + p + 6), expect++) << "trial " << t["id"];
    }
    EXPECT_EQ(expect - 1, t["fidelity"].get<int>());
  }
  EXPECT_GE(completed, 1);
  EXPECT_GE(pruned, 5);
  // Promotion resumes: the epochs trained equal the fidelity reached, not the rung budgets.
  EXPECT_EQ(j["fidelity_consumed"].get<double>(), sum_reached);
}

TEST_F(CliTest, AshaTrialWithoutCheckpointRestartsFromScratchAndIsCounted) {
  int rc = 0;
  nlohmann::json j = RunAsha(dir_, "--no-checkpoint", &rc);
  ASSERT_EQ(rc, 0);
  int restarts = 0;
  double sum_reached = 0;
  for (const auto& t : j["trials"]) {
    restarts += t["restarts_from_scratch"].get<int>();
    sum_reached += t["fidelity"].get<double>();
    EXPECT_EQ(t["restarts_from_scratch"], t["attempts"].get<int>() - 1) << t.dump();
  }
  EXPECT_GE(restarts, 3);
  EXPECT_GT(j["fidelity_consumed"].get<double>(), sum_reached);
  auto events = RunProcess({kSextant, "events", dir_ + "/run"});
  EXPECT_THAT(events.out, HasSubstr("restarted_from_scratch"));
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

// Two objectives and a constraint, through real trial processes: trial 3 reports NaN, trial 4
// forgets the second objective, trial 5 forgets the constraint metric, the rest are ZDT1-like.
TEST_F(CliTest, SeveralObjectivesGiveAParetoFrontAndBadTrialsNeverEnterIt) {
  WriteFile(dir_ + "/mo.sh", R"(#!/bin/sh
case "$SEXTANT_TRIAL_ID" in
  3) echo "f1=nan f2=1 mb=1" ;;
  4) echo "f1=0.5 mb=1" ;;
  5) echo "f1=0.01 f2=0.01" ;;
  *) awk -v a="$SEXTANT_PARAM_A" -v b="$SEXTANT_PARAM_B" 'BEGIN {
       g = 1 + 9 * b; printf "f1=%.9f f2=%.9f mb=%.3f\n", a, g * (1 - sqrt(a / g)), 100 * a }' ;;
esac
)");
  WriteFile(dir_ + "/mo.yaml", R"(name: mo
objectives:
  - {metric: f1, goal: minimize}
  - {metric: f2, goal: minimize, reference: 11}
constraints: [{metric: mb, max: 80}]
parameters:
  a: {type: float, min: 0, max: 1}
  b: {type: float, min: 0, max: 1}
search: {sampler: nsga2, seed: 2, max_trials: 24, max_concurrent: 2}
trial: {command: [sh, mo.sh]}
)");
  auto r = RunProcess({kSextant, "run", dir_ + "/mo.yaml", "--run-dir", dir_ + "/run"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("hypervolume"));
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_TRUE(j["best"].is_null());
  EXPECT_TRUE(j["objective"].is_null());
  ASSERT_EQ(j["objectives"].size(), 2u);
  EXPECT_EQ(j["objectives"][1]["metric"], "f2");
  const auto& trials = j["trials"];
  ASSERT_EQ(trials.size(), 24u);
  EXPECT_EQ(trials[2]["state"], "FAILED");
  EXPECT_THAT(trials[2]["error"].get<std::string>(), HasSubstr("'f1' is nan"));
  EXPECT_EQ(trials[3]["state"], "FAILED");
  EXPECT_THAT(trials[3]["error"].get<std::string>(),
              HasSubstr("never reported the objective metric 'f2'"));
  EXPECT_EQ(trials[4]["state"], "COMPLETED");
  EXPECT_FALSE(trials[4]["feasible"].get<bool>());
  bool event = false;
  for (const auto& e : trials[4]["events"]) {
    event |= e["kind"] == "constraint_missing" &&
             e["message"].get<std::string>().find("'mb'") != std::string::npos;
  }
  EXPECT_TRUE(event) << trials[4].dump();
  // The front: exactly the feasible completed trials that no other such trial dominates.
  std::set<int> expected;
  for (const auto& t : trials) {
    if (t["state"] != "COMPLETED" || !t["feasible"].get<bool>()) continue;
    ASSERT_EQ(t["values"].size(), 2u);
    bool dominated = false;
    for (const auto& u : trials) {
      if (u["state"] != "COMPLETED" || !u["feasible"].get<bool>() || u["id"] == t["id"]) continue;
      const double a0 = u["values"][0], a1 = u["values"][1], b0 = t["values"][0],
                   b1 = t["values"][1];
      dominated |= a0 <= b0 && a1 <= b1 && (a0 < b0 || a1 < b1);
    }
    if (!dominated) expected.insert(t["id"].get<int>());
  }
  std::set<int> front;
  for (const auto& p : j["pareto"]) front.insert(p["trial"].get<int>());
  EXPECT_EQ(front, expected);
  EXPECT_FALSE(front.count(5)) << "trial 5 dominates everything but is infeasible";
  EXPECT_GT(j["hypervolume"].get<double>(), 0);
  EXPECT_EQ(j["reference_point"][1], 11.0);
  EXPECT_EQ(j["reference_point_source"], "derived");  // f1's is derived
  auto csv = RunProcess({kSextant, "results", dir_ + "/run", "--format", "csv"});
  EXPECT_THAT(csv.out,
              HasSubstr("id,state,value,attempts,fidelity,cost,feasible,value.f1,value.f2"));
  auto status = RunProcess({kSextant, "status", dir_ + "/run"});
  EXPECT_THAT(status.out, HasSubstr("pareto front: "));
  EXPECT_THAT(status.out, HasSubstr("hypervolume"));
}

TEST_F(CliTest, AReferencePointNoTrialBeatsGivesZeroHypervolumeAndSaysWhy) {
  WriteFile(dir_ + "/two.sh", "#!/bin/sh\necho \"f1=$SEXTANT_PARAM_A f2=2\"\n");
  WriteFile(dir_ + "/two.yaml", R"(name: ref
objectives: [{metric: f1, reference: -1}, {metric: f2, reference: 1}]
parameters: {a: {type: float, min: 0, max: 1}}
search: {sampler: random, max_trials: 3}
trial: {command: [sh, two.sh]}
)");
  ASSERT_EQ(RunProcess({kSextant, "run", dir_ + "/two.yaml", "--run-dir", dir_ + "/run"}).exit_code,
            0);
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_EQ(j["hypervolume"], 0.0);
  EXPECT_THAT(j["hypervolume_note"].get<std::string>(),
              HasSubstr("no feasible trial dominates the reference point"));
  EXPECT_EQ(j["reference_point_source"], "given");
}

}  // namespace
}  // namespace sextant
