// RunFederated in this process, on the clock the session is given: the run's loop, its tier and
// its waits read the time from it, while its participants are real processes on the real
// clock. A clock ten times fast passes the run's three-minute wall-time budget in about 18 s,
// and the run ends BUDGET_EXHAUSTED after the rounds it finished.
#include "orchestrator/federated/federated_run.h"

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "tests/orchestrator/in_process_run.h"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

constexpr char kExperiment[] = R"(name: fl-in-process
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist, args: {hidden: "16"}}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: ROUNDS
  min_clients: 4
  round_deadline: 1000h
  secure_aggregation: false
  examples_per_client: 200
  validation_examples: 200
budget: {max_wall_time: WALL}
)";

// The run of the experiment with `rounds` rounds and budget.max_wall_time `wall`, here on the
// real clock run `scale` times fast, and the rounds its table lists.
struct Federated {
  testing::InProcessRun run;
  int rounds = 0;
};
Federated RunHere(int rounds, const std::string& wall, double scale) {
  std::string yaml = kExperiment;
  yaml.replace(yaml.find("ROUNDS"), 6, std::to_string(rounds));
  yaml.replace(yaml.find("WALL"), 4, wall);
  const std::string dir = testing::MakeTempDir("fl-in-process");
  testing::WriteFile(dir + "/exp.yaml", yaml);
  RunOptions options;
  options.experiment_file = dir + "/exp.yaml";
  options.run_dir = dir + "/run";
  Federated f;
  f.run = testing::RunInProcess(options, scale, RunFederated);
  f.rounds = static_cast<int>(
      testing::QueryRows(dir + "/run/state.db", "SELECT round FROM rounds WHERE region = ''")
          .size());
  return f;
}

TEST(FederatedInProcessTest, RunsItsRoundsOnTheClockItIsGiven) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const Federated f = RunHere(2, "1h", 1);
  const testing::InProcessRun& r = f.run;
  ASSERT_TRUE(r.status.ok()) << r.status << "\n" << r.out << r.err;
  EXPECT_EQ(r.state, v1::RUN_COMPLETED) << r.out;
  EXPECT_EQ(f.rounds, 2) << r.out;
  EXPECT_NE(r.out.find("sextant: round=2 "), std::string::npos) << r.out;
}

TEST(FederatedInProcessTest, AFastClockPassesTheWallTimeBudgetAndTheRunEndsBudgetExhausted) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  // Ten seconds of the run's clock per real second: its five minutes are gone in 30 s, time
  // enough, on a loaded machine too, for the participants (on the real clock) to start and
  // finish a round.
  const Federated f = RunHere(100000, "5m", 10);
  const testing::InProcessRun& r = f.run;
  ASSERT_TRUE(r.status.ok()) << r.status << "\n" << r.out << r.err;
  EXPECT_EQ(r.state, v1::RUN_BUDGET_EXHAUSTED) << r.out;
  EXPECT_GE(r.clock_elapsed, absl::Minutes(5));
  EXPECT_LT(r.real_seconds, 60) << r.out;
  EXPECT_GE(f.rounds, 1) << r.out;
  EXPECT_LT(f.rounds, 100000) << r.out;
  EXPECT_NE(r.out.find("sextant: stopped after round "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace sextant
