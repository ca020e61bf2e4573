// The Slurm provider against real daemons: slurmctld, slurmd and munged from Debian's packages,
// started on loopback by the test with their own config (tests/orchestrator/slurm_cluster.h).
// Skipped, with the reason, where they cannot start (not root, packages missing).
#include <map>
#include <regex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/slurm_cluster.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using testing::CheckpointingStepsScript;
using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::SlurmCluster;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

TEST(SlurmProviderTest, SixTrialSearchRunsEveryWorkerAsASlurmJobInItsPoolsPartition) {
  const std::string dir = MakeTempDir("slurm");
  SlurmCluster cluster;
  const std::string why = cluster.Start(dir + "/cluster");
  SEXTANT_REQUIRE_COMPONENT(why.empty(), "no Slurm cluster here: " << why);

  WriteFile(dir + "/steps.sh", CheckpointingStepsScript(5));
  WriteFile(dir + "/catalog.yaml", R"(regions: [r1]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
billing: {increment: 1s, minimum: 1s}
offers:
  - {region: r1, instance: gpu.1x, market: spot, price_per_hour: 36,
     interruption: {rate_per_day: 0.001, notice: 1s, notice_probability: 1}}
  - {region: r1, instance: gpu.1x, market: on_demand, price_per_hour: 100}
)");
  // Three at a time on two pools of two: spot fills first, on-demand takes the rest.
  WriteFile(dir + "/exp.yaml", R"(name: slurm-six
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: -1, max: 1}
search: {sampler: sobol, seed: 3, max_trials: 6, max_concurrent: 3}
trial:
  command: [sh, steps.sh]
resources:
  provider: slurm
  catalog: catalog.yaml
  idle_timeout: 2s
  pools:
    - {name: spot-r1, region: r1, instance: gpu.1x, market: spot, max_instances: 2}
    - {name: od-r1, region: r1, instance: gpu.1x, market: on_demand, max_instances: 2}
)");
  const std::string env = absl::StrCat("SLURM_CONF=", cluster.conf());
  auto run = RunProcess(
      {"env", env, kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run",
       "--slurm-partition", "ondemand", "--slurm-spot-partition", "spot", "--heartbeat", "0.5s"},
      240);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  auto results = RunProcess({kSextant, "results", dir + "/run", "--format", "json"});
  ASSERT_EQ(results.exit_code, 0) << results.err;
  nlohmann::json j = nlohmann::json::parse(results.out);
  EXPECT_EQ(j["state"], "COMPLETED");
  ASSERT_EQ(j["trials"].size(), 6u) << j.dump();
  for (const auto& t : j["trials"]) {
    EXPECT_EQ(t["state"], "COMPLETED") << t.dump();
    EXPECT_EQ(t["metrics"]["step"], 5.0) << t.dump();
  }
  EXPECT_GT(j["cost"]["total"].get<double>(), 0);

  // Every instance was a job that sbatch queued: its id is in the events and Slurm's own
  // completion log names the same job, in the partition of its pool's market.
  auto events = RunProcess({kSextant, "events", dir + "/run"});
  std::map<std::string, std::string> pool_of_job;
  std::regex launched(R"(instance ([a-z0-9-]+)-\d+ in pool [a-z0-9-]+ \(slurm (\d+)\))");
  for (auto it = std::sregex_iterator(events.out.begin(), events.out.end(), launched);
       it != std::sregex_iterator(); ++it) {
    pool_of_job[(*it)[2]] = (*it)[1];
  }
  std::set<std::string> pools;
  for (const auto& [job, pool] : pool_of_job) pools.insert(pool);
  EXPECT_EQ(pools, (std::set<std::string>{"spot-r1", "od-r1"})) << events.out;
  // Every instance was stopped at the end of the run: nothing is left in the queue.
  std::string queue;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        queue = RunProcess({"env", env, "squeue", "-h", "-t", "PENDING,RUNNING"}).out;
        return queue.empty();
      },
      15))
      << queue;
  const std::string jobcomp = ReadFile(cluster.jobcomp_path());
  for (const auto& [job, pool] : pool_of_job) {
    const std::string partition = pool == "spot-r1" ? "spot" : "ondemand";
    std::regex line(
        absl::StrCat("JobId=", job, " .*Name=sextant-", pool, "-\\d+ .*Partition=", partition));
    EXPECT_TRUE(std::regex_search(jobcomp, line)) << "job " << job << " of pool " << pool << "\n"
                                                  << jobcomp;
  }
}

}  // namespace
}  // namespace sextant
