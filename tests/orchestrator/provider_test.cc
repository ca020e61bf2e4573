// Live runs on real providers: `sextant run` with resources.pools launches, bills and scales
// real `sextant-worker` processes (local provider) or Slurm jobs (slurm provider).
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

nlohmann::json Results(const std::string& run_dir) {
  auto r = RunProcess({kSextant, "results", run_dir, "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

// Ten steps with a checkpoint after each; on SIGTERM (the preemption notice) the script saves
// and exits 75, and a resumed attempt continues from the saved step.
constexpr const char* kSteps = R"SH(#!/bin/sh
ck="$SEXTANT_CHECKPOINT_DIR/step"
i=0
[ -f "$ck" ] && i=$(cat "$ck")
trap 'echo "$i" > "$ck"; exit 75' TERM
while [ "$i" -lt 10 ]; do
  i=$((i + 1))
  echo "$i" > "$ck"
  echo "step=$i loss=$((100 - i))"
  sleep 0.3 & wait $!
done
)SH";

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
  WriteFile(dir + "/steps.sh", kSteps);
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
  auto run = RunProcess({kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run",
                         "--heartbeat", "0.3s"},
                        120);
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
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"spot_notice\""));
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"trial_preempted\""));
  EXPECT_THAT(events.out, HasSubstr("\"kind\":\"placement\""));
  EXPECT_GT(j["cost"]["total"].get<double>(), 0);
  EXPECT_TRUE(j["cost"]["by_pool"].contains("spot-r1")) << j["cost"].dump();
}

TEST(LocalProviderRunTest, BudgetIsEnforcedLiveAndTheRunEndsBudgetExhausted) {
  const std::string dir = MakeTempDir("budget");
  WriteFile(dir + "/steps.sh", kSteps);
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

}  // namespace
}  // namespace sextant
