// Live runs on real providers: `sextant run` with resources.pools launches, bills and scales
// real `sextant-worker` processes (local provider) or Slurm jobs (slurm provider).
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/store.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::BackgroundProcess;
using testing::CheckpointingStepsScript;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
const std::string kWorker = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";

nlohmann::json Results(const std::string& run_dir) {
  auto r = RunProcess({kSextant, "results", run_dir, "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

std::string Experiment(const std::string& name, int trials, int concurrent,
                       const std::string& rest) {
  return absl::StrCat("name: ", name, R"(
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: sobol, seed: 3, max_trials: )",
                      trials, ", max_concurrent: ", concurrent, R"(}
trial:
  command: [sh, steps.sh]
)",
                      rest);
}

TEST(LocalProviderRunTest, SpotInterruptionsPreemptTrialsThatResumeToTheExactTarget) {
  const std::string dir = MakeTempDir("spot");
  WriteFile(dir + "/steps.sh", CheckpointingStepsScript(10));
  // About one interruption per instance every 3 s, always with a 1 s notice.
  WriteFile(dir + "/catalog.yaml", R"(regions: [r1]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: gpu.1x, market: spot, price_per_hour: 36,
     interruption: {rate_per_day: 28800, notice: 1s, notice_probability: 1}}
)");
  WriteFile(dir + "/exp.yaml", Experiment("spot", 4, 2, R"(resources:
  provider: local
  catalog: catalog.yaml
  idle_timeout: 1s
  pools:
    - {name: spot-r1, region: r1, instance: gpu.1x, market: spot, max_instances: 2}
)"));
  auto run = RunProcess(
      {kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run", "--heartbeat", "0.3s"}, 120);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  nlohmann::json j = Results(dir + "/run");
  ASSERT_EQ(j["trials"].size(), 4u) << j.dump();
  int preemptions = 0;
  for (const auto& t : j["trials"]) {
    EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
    EXPECT_EQ(t["metrics"]["step"], 10.0) << t.dump();  // the target, exactly
    EXPECT_EQ(t["value"], 90.0) << t.dump();
    preemptions += t["preemptions"].get<int>();
  }
  EXPECT_GE(preemptions, 1) << j.dump();
  // Counted per trial and per pool in the results, and shown by status.
  EXPECT_EQ(j["preemptions"]["total"], preemptions) << j["preemptions"].dump();
  int by_trial = 0;
  for (const auto& [id, n] : j["preemptions"]["by_trial"].items()) {
    by_trial += n.get<int>();
    EXPECT_EQ(j["trials"][std::stoi(id) - 1]["preemptions"], n) << id;
  }
  EXPECT_EQ(by_trial, preemptions);
  ASSERT_TRUE(j["preemptions"]["by_pool"].contains("spot-r1")) << j["preemptions"].dump();
  EXPECT_GE(j["preemptions"]["by_pool"]["spot-r1"].get<int>(), 1) << j["preemptions"].dump();
  auto status = RunProcess({kSextant, "status", dir + "/run"});
  EXPECT_THAT(status.out, HasSubstr(absl::StrCat("preemptions: ", preemptions,
                                                 " of trials (by pool: spot-r1 ")));
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"spot_notice\""));
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"trial_preempted\""));
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"placement\""));
  EXPECT_GT(j["cost"]["total"].get<double>(), 0);
  EXPECT_TRUE(j["cost"]["by_pool"].contains("spot-r1")) << j["cost"].dump();
}

TEST(LocalProviderRunTest, BudgetIsEnforcedLiveAndTheRunEndsBudgetExhausted) {
  const std::string dir = MakeTempDir("budget");
  WriteFile(dir + "/steps.sh", CheckpointingStepsScript(10));
  // 0.1 per second per instance; the cap pays for about 15 s of two instances.
  WriteFile(dir + "/catalog.yaml", R"(regions: [r1]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: gpu.1x, market: on_demand, price_per_hour: 360}
)");
  WriteFile(dir + "/exp.yaml", Experiment("budget", 40, 2, R"(budget: {max_cost: 5.0}
resources:
  provider: local
  catalog: catalog.yaml
  pools:
    - {name: od-r1, region: r1, instance: gpu.1x, market: on_demand, max_instances: 2}
)"));
  auto run = RunProcess({kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, 120);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("budget.max_cost reached"));
  EXPECT_THAT(run.out, HasSubstr("/5.00"));  // the progress lines show spend against the budget
  nlohmann::json j = Results(dir + "/run");
  EXPECT_EQ(j["state"], "BUDGET_EXHAUSTED");
  const double total = j["cost"]["total"].get<double>();
  // Overshoot at most one 1 s increment per live instance (two).
  EXPECT_LE(total, 5.0 + 2 * 0.1 + 1e-9) << j["cost"].dump();
  EXPECT_GT(total, 2.0);
  double by_trial = 0;
  int completed = 0;
  for (const auto& t : j["trials"]) {
    by_trial += t["cost"].get<double>();
    completed += t["state"] == "COMPLETED";
  }
  EXPECT_GT(completed, 0);
  EXPECT_LT(completed, 40);
  EXPECT_GT(by_trial, 0);
  EXPECT_LE(by_trial, total + 1e-9);
  auto status = RunProcess({kSextant, "results", dir + "/run"});
  EXPECT_THAT(status.out, HasSubstr("of budget 5.00"));
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"budget_exhausted\""));
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"instance_launched\""));
}

TEST(LocalProviderRunTest,
     AtTheBudgetRunningTrialsCheckpointAndStopAndResumeWithARaisedBudgetFinishesThem) {
  const std::string dir = MakeTempDir("budget-resume");
  // The budget runs out when the two instances are about 4 s old (their bills plus the wind-down
  // the guard keeps back); a trial takes at least 6 s, so the first two are always mid-way then.
  WriteFile(dir + "/steps.sh", CheckpointingStepsScript(20, /*report_start=*/true));
  WriteFile(dir + "/catalog.yaml", R"(regions: [r1]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: gpu.1x, market: on_demand, price_per_hour: 360}
)");
  std::string exp = Experiment("budget-resume", 6, 2, R"(budget: {max_cost: 3.0}
resources:
  provider: local
  catalog: catalog.yaml
  pools:
    - {name: od-r1, region: r1, instance: gpu.1x, market: on_demand, max_instances: 2}
)");
  WriteFile(dir + "/exp.yaml", exp);
  auto first = RunProcess({kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, 120);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_THAT(first.out, HasSubstr("running trials checkpointed and stopped"));
  nlohmann::json j = Results(dir + "/run");
  EXPECT_EQ(j["state"], "BUDGET_EXHAUSTED");
  const double spent = j["cost"]["total"].get<double>();
  EXPECT_LE(spent, 3.0 + 2 * 0.1 + 1e-9) << j["cost"].dump();
  // The trials that were running got the notice: each wrote its checkpoint mid-way and was
  // stopped, not counted as a preemption, and not failed.
  std::vector<int> stopped;
  for (const auto& t : j["trials"]) {
    EXPECT_NE(t["state"], "FAILED") << t.dump();
    EXPECT_EQ(t["preemptions"], 0) << t.dump();
    if (t["state"] != "CANCELLED") continue;
    stopped.push_back(t["id"].get<int>());
    const std::string ck = ReadFile(
        absl::StrCat(dir, "/run/artifacts/checkpoints/trial-", t["id"].get<int>(), "/step"));
    EXPECT_FALSE(ck.empty()) << t.dump();
  }
  ASSERT_FALSE(stopped.empty()) << j.dump();
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"trial_stopped\""));
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"run_stopping\""));
  // The run ended with its report, written into the run directory.
  EXPECT_THAT(first.out, HasSubstr("wrote " + dir + "/run/report.html"));
  EXPECT_THAT(ReadFile(dir + "/run/report.html"), HasSubstr("BUDGET_EXHAUSTED"));

  // A raised budget continues the stopped trials from their checkpoints to the exact target.
  auto second = RunProcess({kSextant, "resume", dir + "/run", "--max-cost", "50"}, 120);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  j = Results(dir + "/run");
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(j["cost"]["budget"], 50.0);
  EXPECT_GT(j["cost"]["total"].get<double>(), spent);  // the first session's bills are kept
  ASSERT_EQ(j["trials"].size(), 6u);
  for (const auto& t : j["trials"]) {
    EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
    EXPECT_EQ(t["metrics"]["step"], 20.0) << t.dump();
  }
  for (int id : stopped) {
    const auto& t = j["trials"][id - 1];
    EXPECT_EQ(t["attempts"], 2) << t.dump();
    EXPECT_GT(t["metrics"]["resumed_from"].get<double>(), 0) << t.dump();  // not from scratch
  }
}

TEST(LocalProviderRunTest, AtMaxWallTimeLocalWorkersCheckpointAndStopAndResumeContinuesThem) {
  const std::string dir = MakeTempDir("wall-time");
  WriteFile(dir + "/steps.sh", CheckpointingStepsScript(10, /*report_start=*/true));
  WriteFile(dir + "/exp.yaml", Experiment("wall-time", 4, 2, "budget: {max_wall_time: 2s}\n"));
  auto first = RunProcess({kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, 120);
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_THAT(first.out, HasSubstr("budget.max_wall_time reached"));
  nlohmann::json j = Results(dir + "/run");
  EXPECT_EQ(j["state"], "BUDGET_EXHAUSTED");
  std::vector<int> stopped;
  for (const auto& t : j["trials"]) {
    if (t["state"] == "CANCELLED") stopped.push_back(t["id"].get<int>());
  }
  ASSERT_FALSE(stopped.empty()) << j.dump();
  auto second = RunProcess({kSextant, "resume", dir + "/run", "--max-wall-time", "2m"}, 120);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  j = Results(dir + "/run");
  EXPECT_EQ(j["state"], "COMPLETED");
  for (const auto& t : j["trials"]) EXPECT_EQ(t["metrics"]["step"], 10.0) << t.dump();
  for (int id : stopped) {
    EXPECT_GT(j["trials"][id - 1]["metrics"]["resumed_from"].get<double>(), 0)
        << j["trials"][id - 1].dump();
  }
}

// A hand-started (static) worker cannot be signalled by the orchestrator: at the budget it gets
// the notice through its heartbeat (ACTION_NOTICE), its trial checkpoints and is handed back, and
// `resume` with a new worker continues it from that checkpoint.
TEST(StaticProviderRunTest, AtTheBudgetAStaticWorkersTrialGetsTheNoticeAndResumeContinuesIt) {
  const std::string dir = MakeTempDir("static-budget");
  WriteFile(dir + "/steps.sh", CheckpointingStepsScript(20, /*report_start=*/true));
  WriteFile(dir + "/catalog.yaml", R"(regions: [r1]
instances: {cpu.1x: {cpus: 1}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: cpu.1x, market: on_demand, price_per_hour: 1}
)");
  WriteFile(dir + "/exp.yaml", Experiment("static-budget", 1, 1, R"(resources:
  provider: static
  catalog: catalog.yaml
  pools:
    - {name: a, region: r1, instance: cpu.1x, market: on_demand, max_instances: 1}
budget: {max_wall_time: 3s}
)"));
  // Starts `sextant ARGS...` and one static worker for it; returns the run's exit code.
  auto run_with_worker = [&](std::vector<std::string> args, std::string* worker_err) {
    std::vector<std::string> argv = {kSextant};
    argv.insert(argv.end(), args.begin(), args.end());
    BackgroundProcess run(argv);
    EXPECT_TRUE(run.WaitForOutput("start workers with", 60)) << run.out() << run.err();
    std::smatch m;
    const std::string out = run.out();
    if (!std::regex_search(out, m, std::regex("--connect (\\S+) .*--secret-file (\\S+)"))) {
      return -1;
    }
    BackgroundProcess worker({kWorker, "--connect", m[1].str(), "--region", "r1", "--pool", "a",
                              "--secret-file", m[2].str()});
    const int rc = run.Wait(120);
    EXPECT_EQ(worker.Wait(30), 0) << worker.err();
    *worker_err = worker.err();
    EXPECT_EQ(rc, 0) << run.out() << run.err();
    return rc;
  };
  std::string worker_err;
  ASSERT_EQ(run_with_worker({"run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, &worker_err), 0);
  EXPECT_THAT(worker_err, HasSubstr("preempted; trial 1 handed back"));
  nlohmann::json j = Results(dir + "/run");
  EXPECT_EQ(j["state"], "BUDGET_EXHAUSTED");
  ASSERT_EQ(j["trials"].size(), 1u);
  EXPECT_EQ(j["trials"][0]["state"], "CANCELLED") << j.dump();
  const double stopped_at = j["trials"][0]["metrics"]["step"].get<double>();
  EXPECT_LT(stopped_at, 20);
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"trial_stopped\""));

  ASSERT_EQ(run_with_worker({"resume", dir + "/run", "--max-wall-time", "2m"}, &worker_err), 0);
  j = Results(dir + "/run");
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(j["trials"][0]["metrics"]["step"], 20.0) << j.dump();
  EXPECT_GE(j["trials"][0]["metrics"]["resumed_from"].get<double>(), stopped_at - 1) << j.dump();
}

// A trial that runs to the fidelity target the scheduler sets (SEXTANT_FIDELITY), one step
// every `pause` seconds, resuming from its checkpoint when promoted or requeued and saving it
// on SIGTERM; `report` is the shell command that prints step i's metrics.
std::string FidelityTrial(const std::string& report, const std::string& pause) {
  return absl::StrCat(R"SH(#!/bin/sh
ck="$SEXTANT_CHECKPOINT_DIR/step"
i=0
[ -f "$ck" ] && i=$(cat "$ck")
target=${SEXTANT_FIDELITY%.*}
trap 'echo "$i" > "$ck"; exit 75' TERM
while [ "$i" -lt "$target" ]; do
  i=$((i + 1))
  echo "$i" > "$ck"
  )SH",
                      report, "\n  sleep ", pause, " & wait $!\ndone\n");
}

const std::string kRungs =
    FidelityTrial("echo \"step=$i loss=$((100 - i * ${SEXTANT_PARAM_K}))\"", "0.2");

TEST(LocalProviderRunTest, MixedPlacementRunsTopRungTrialsOnTheOnDemandPoolAndSaysWhy) {
  const std::string dir = MakeTempDir("top-rung");
  WriteFile(dir + "/steps.sh", kRungs);
  WriteFile(dir + "/catalog.yaml", R"(regions: [r1]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: gpu.1x, market: spot, price_per_hour: 36,
     interruption: {rate_per_day: 0.001, notice: 1s, notice_probability: 1}}
  - {region: r1, instance: gpu.1x, market: on_demand, price_per_hour: 100}
)");
  WriteFile(dir + "/exp.yaml", R"(name: top-rung
objective: {metric: loss, goal: minimize}
parameters:
  k: {type: int, min: 1, max: 9}
search:
  sampler: sobol
  scheduler: asha
  fidelity: {name: step, min: 1, max: 4, reduction_factor: 2}
  seed: 5
  max_trials: 8
  max_concurrent: 2
trial:
  command: [sh, steps.sh]
resources:
  provider: local
  catalog: catalog.yaml
  idle_timeout: 2s
  placement: {policy: mixed}
  pools:
    - {name: spot-r1, region: r1, instance: gpu.1x, market: spot, max_instances: 2}
    - {name: od-r1, region: r1, instance: gpu.1x, market: on_demand, max_instances: 1}
)");
  auto run = RunProcess(
      {kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run", "--heartbeat", "0.3s"}, 180);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  nlohmann::json j = Results(dir + "/run");
  int top = 0;
  for (const auto& t : j["trials"]) top += t["metrics"].value("step", 0.0) == 4.0;
  ASSERT_GE(top, 1) << "no trial reached the top rung: " << j.dump();
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  int top_leases = 0;
  for (const std::string& line : std::vector<std::string>(absl::StrSplit(events.out, '\n'))) {
    if (line.find("\"kind\":\"placement\"") == std::string::npos) continue;
    if (line.find("top rung (step=4) runs on worker") == std::string::npos) continue;
    ++top_leases;
    EXPECT_THAT(line, HasSubstr("of pool od-r1")) << line;
    EXPECT_THAT(line, HasSubstr("mixed placement runs the top rung"));
  }
  EXPECT_GE(top_leases, top) << events.out;
  // The fleet launched on-demand capacity for the top rung, and said why.
  EXPECT_THAT(events.out, HasSubstr("instance od-r1-"));
  EXPECT_THAT(events.out,
              ::testing::ContainsRegex("pool od-r1 \\(on_demand, r1, [^)]*\\): [^\"]*top rung"));
}

TEST(SlurmProviderRunTest, SbatchThatKeepsFailingIsRetriedWithBackoffOnEveryPoolThenTheRunFails) {
  const std::string dir = MakeTempDir("sbatch-fails");
  WriteFile(dir + "/steps.sh", CheckpointingStepsScript(10));
  // A real sbatch on PATH that always refuses, and counts its calls.
  WriteFile(dir + "/bin/sbatch",
            absl::StrCat("#!/bin/sh\necho x >> ", dir,
                         "/sbatch-calls\necho 'sbatch: error: Batch job "
                         "submission failed: Invalid partition name specified' >&2\nexit 1\n"));
  chmod((dir + "/bin/sbatch").c_str(), 0755);
  WriteFile(dir + "/catalog.yaml", R"(regions: [r1, r2]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: gpu.1x, market: on_demand, price_per_hour: 36}
  - {region: r2, instance: gpu.1x, market: on_demand, price_per_hour: 40}
)");
  WriteFile(dir + "/exp.yaml", Experiment("sbatch-fails", 4, 2, R"(resources:
  provider: slurm
  catalog: catalog.yaml
  pools:
    - {name: a, region: r1, instance: gpu.1x, market: on_demand, max_instances: 2}
    - {name: b, region: r2, instance: gpu.1x, market: on_demand, max_instances: 2}
)"));
  const std::string path = absl::StrCat("PATH=", dir, "/bin:", getenv("PATH"));
  auto run =
      RunProcess({"env", path, kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, 120);
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("every pool failed to launch instances"));
  // Five tries per pool (backoff 1, 2, 4, 8 s between them), then the pool is given up.
  const std::string calls = ReadFile(dir + "/sbatch-calls");
  EXPECT_EQ(std::count(calls.begin(), calls.end(), '\n'), 10) << calls;
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  EXPECT_THAT(events.out, HasSubstr("Invalid partition name"));
  EXPECT_THAT(events.out, HasSubstr("retrying in 8 s"));
  EXPECT_THAT(events.out, HasSubstr("pool a: "));
  EXPECT_THAT(events.out, HasSubstr("pool b: "));
  EXPECT_THAT(events.out, HasSubstr("giving this pool up"));
}

// `resume` of a Slurm run sends its jobs to the partitions the run was started with: a real
// sbatch on PATH records its arguments (and refuses, so no job runs); the run is interrupted after
// each sbatch call and resumed, with and without a partition flag.
TEST(SlurmProviderRunTest, ResumeKeepsTheRunsPartitionsUnlessItsFlagsNameOthers) {
  const std::string dir = MakeTempDir("sbatch-partitions");
  WriteFile(dir + "/steps.sh", CheckpointingStepsScript(10));
  WriteFile(dir + "/bin/sbatch", absl::StrCat("#!/bin/sh\necho \"$*\" >> ", dir,
                                              "/sbatch-calls\necho 'sbatch: error: busy' >&2\n"
                                              "exit 1\n"));
  chmod((dir + "/bin/sbatch").c_str(), 0755);
  WriteFile(dir + "/catalog.yaml", R"(regions: [r1]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: gpu.1x, market: on_demand, price_per_hour: 36}
)");
  WriteFile(dir + "/exp.yaml", Experiment("sbatch-partitions", 4, 2, R"(resources:
  provider: slurm
  catalog: catalog.yaml
  pools:
    - {name: a, region: r1, instance: gpu.1x, market: on_demand, max_instances: 2}
)"));
  const std::string path = absl::StrCat("PATH=", dir, "/bin:", getenv("PATH"));
  auto calls = [&] {
    return std::vector<std::string>(
        absl::StrSplit(ReadFile(dir + "/sbatch-calls"), '\n', absl::SkipEmpty()));
  };
  // Runs `sextant ARGS...` until sbatch has been called once more, then interrupts it; returns
  // that call's partition.
  auto next_partition = [&](std::vector<std::string> args) -> std::string {
    const size_t before = calls().size();
    std::vector<std::string> argv = {"env", path, kSextant};
    argv.insert(argv.end(), args.begin(), args.end());
    BackgroundProcess p(argv);
    const bool called = testing::WaitFor([&] { return calls().size() > before; }, 60);
    p.Signal(SIGINT);
    EXPECT_NE(p.Wait(30), -1000) << p.out() << p.err();
    if (!called) return "sbatch was not called: " + p.err();
    std::smatch m;
    const std::string call = calls()[before];
    return std::regex_search(call, m, std::regex("--partition=([a-z-]+)")) ? m[1].str() : call;
  };
  EXPECT_EQ(next_partition({"run", dir + "/exp.yaml", "--run-dir", dir + "/run",
                            "--slurm-partition", "gpu-a"}),
            "gpu-a");
  EXPECT_EQ(next_partition({"resume", dir + "/run"}), "gpu-a");
  EXPECT_EQ(next_partition({"resume", dir + "/run", "--slurm-partition", "gpu-b"}), "gpu-b");
  EXPECT_EQ(next_partition({"resume", dir + "/run"}), "gpu-b");
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

// A trial that reports, step by step from its checkpoint, exactly what the workload model of
// `sextant simulate` says for (x0, x1) with noise 0: Branin plus 2 * (sqrt(F / f) - 1).
const std::string kModelTrial = FidelityTrial(
    R"SH(awk -v x0="$SEXTANT_PARAM_X0" -v x1="$SEXTANT_PARAM_X1" -v f="$i" 'BEGIN {
    pi = atan2(0, -1); b = 5.1 / (4 * pi * pi); c = 5 / pi; t = 1 / (8 * pi);
    a = x1 - b * x0 * x0 + c * x0 - 6;
    v = a * a + 10 * (1 - t) * cos(x0) + 10 + 2 * (sqrt(4 / f) - 1);
    printf "step=%d loss=%.17g\n", f, v }')SH",
    "0.1");

struct RunRecord {
  std::vector<TrialRow> trials;
  std::vector<std::string> decisions;   // scheduler events: "kind trial"
  std::vector<std::string> placements;  // fleet events: "kind pool" in order
  std::vector<std::string> ledger;      // cost rows: "kind ref pool region market"
};

RunRecord Record(const std::string& run_dir) {
  RunRecord r;
  auto store = Store::Open(run_dir + "/state.db", /*create=*/false, /*read_only=*/true);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return r;
  r.trials = *(*store)->LoadTrials();
  const std::vector<EventRow> events = *(*store)->LoadEvents();
  for (const EventRow& e : events) {
    if (e.kind == "trial_promoted" || e.kind == "trial_pruned" || e.kind == "schedule_finished") {
      r.decisions.push_back(absl::StrCat(e.kind, " ", e.trial_id));
    }
    std::smatch m;
    if ((e.kind == "instance_launched" || e.kind == "instance_released") &&
        std::regex_search(e.message, m, std::regex("in pool (\\S+)|of pool (\\S+):"))) {
      r.placements.push_back(absl::StrCat(e.kind, " ", m[1].str(), m[2].str()));
    } else if (e.kind == "placement" || e.kind == "reservation" || e.kind == "budget_refused") {
      r.placements.push_back(absl::StrCat(e.kind, " ", e.trial_id, " ", e.message));
    }
  }
  const std::vector<CostRow> costs = *(*store)->LoadCosts();
  for (const CostRow& c : costs) {
    r.ledger.push_back(absl::StrCat(c.kind, " ", c.ref, " ", c.pool, " ", c.region, " ", c.market,
                                    c.cost > 0 ? " charged" : " free"));
  }
  return r;
}

// `sextant run` (local provider, real worker processes, a trial command that reports what the
// workload model says) and `sextant simulate` of the same experiment file drive the same
// Dispatcher, Fleet, placement, autoscaler and ledger, so they decide the same: the same trials
// and rungs, scheduler events, launches and placements, and ledger rows. The amounts differ
// only because `run` spends real seconds and `simulate` the model's.
TEST(RunAndSimulateTest, MakeTheSameDecisionsPlacementsAndLedgerRows) {
  const std::string dir = MakeTempDir("equivalence");
  WriteFile(dir + "/model.sh", kModelTrial);
  WriteFile(dir + "/exp.yaml", R"(name: equivalence
objective: {metric: loss, goal: minimize}
parameters:
  x0: {type: float, min: -5, max: 10}
  x1: {type: float, min: 0, max: 15}
search:
  sampler: random
  scheduler: asha
  fidelity: {name: step, min: 1, max: 4, reduction_factor: 2}
  seed: 11
  max_trials: 10
  max_concurrent: 1
trial:
  command: [sh, model.sh]
resources:
  provider: local
  pools:
    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, max_instances: 1}
simulate: {noise: 0, objective: branin}
)");
  auto run = RunProcess({kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run"}, 240);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto sim = RunProcess({kSextant, "simulate", dir + "/exp.yaml", "--run-dir", dir + "/sim"}, 120);
  ASSERT_EQ(sim.exit_code, 0) << sim.out << sim.err;
  const RunRecord a = Record(dir + "/run");
  const RunRecord b = Record(dir + "/sim");
  ASSERT_EQ(a.trials.size(), 10u);
  ASSERT_EQ(a.trials.size(), b.trials.size());
  int promoted = 0;
  for (size_t i = 0; i < a.trials.size(); ++i) {
    const TrialRow& x = a.trials[i];
    const TrialRow& y = b.trials[i];
    SCOPED_TRACE(absl::StrCat("trial ", x.id));
    EXPECT_EQ(x.params_json, y.params_json);
    EXPECT_EQ(x.state, y.state);
    EXPECT_EQ(x.attempts, y.attempts);
    EXPECT_EQ(x.fidelity, y.fidelity);
    EXPECT_EQ(x.target, y.target);
    ASSERT_TRUE(x.value.has_value() && y.value.has_value());
    EXPECT_NEAR(*x.value, *y.value, 1e-9 * std::max(1.0, std::fabs(*x.value)));
    const nlohmann::json rx = nlohmann::json::parse(x.rungs_json);
    const nlohmann::json ry = nlohmann::json::parse(y.rungs_json);
    ASSERT_EQ(rx.size(), ry.size()) << x.rungs_json << " vs " << y.rungs_json;
    for (size_t k = 0; k < rx.size(); ++k) {
      EXPECT_EQ(rx[k]["decision"], ry[k]["decision"]);
      EXPECT_EQ(rx[k]["fidelity"], ry[k]["fidelity"]);
      promoted += rx[k]["decision"] == "promoted";
    }
  }
  EXPECT_GT(promoted, 2) << "the comparison covers promotions, not only first rungs";
  EXPECT_EQ(a.decisions, b.decisions);
  EXPECT_EQ(a.placements, b.placements);
  EXPECT_EQ(a.ledger, b.ledger);
}

}  // namespace
}  // namespace sextant
