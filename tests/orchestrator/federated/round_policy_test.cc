// The federated run's round policy (federated_run.cc) in this process, on a FakeClock, its
// participants "launched" by a fake launcher that starts nothing: what the run asks to start
// and in which order, how long it waits for an aggregator's port and for its regions, that a
// round no region answers stays open (a region's own aggregator answers for its clients) but
// not for ever, and how the wall-time budget stops the run, waiting or mid-round. No
// participant process runs and no wait takes its time in real time.
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/federated/federated_run.h"
#include "orchestrator/session/run_session.h"
#include "tensors/safetensors.h"
#include "tests/fakes/clock_ticker.h"
#include "tests/fakes/fake_launcher.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

// Records every launch; an aggregator "starts listening" at once: the address file its command
// line names gets an address, so that the run goes on to launch its clients and its rounds. No
// update ever comes.
class ListeningAggregators : public testing::FakeLauncher {
 public:
  absl::StatusOr<pid_t> Launch(const std::vector<std::string>& argv,
                               const std::string& log_path) override {
    for (size_t i = 0; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--address-file") std::ofstream(argv[i + 1]) << "127.0.0.1:9\n";
    }
    return FakeLauncher::Launch(argv, log_path);
  }
};

// How the run ended, and what it asked the launcher to do.
struct Ended {
  absl::Status status;
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
  absl::Duration elapsed;  // on the run's FakeClock
  std::string out;
  std::vector<std::string> launched;  // each launch's "--role ROLE [--region R | ...]"
  int global_rows = 0;                // completed rounds in the rounds table
  std::string ready;                  // the federation_ready event, once the regions' wait ended
};

// Runs a 2 regions x 2 clients federated experiment over its own model file, with `budget`
// (a YAML flow map, or empty), on a FakeClock that a ticker moves 100 ms per real millisecond.
// An upper bound on e.elapsed allows for that ratio: the run's 15 s for its participants to
// stop (none does: no process runs) and a real stall of this loaded machine (a second of it is
// 100 s on the run's clock); without the budget, the round would never end.
Ended RunOnFakeClock(testing::FakeLauncher& launcher, const std::string& budget,
                     const std::string& federation = "") {
  const std::string dir = testing::MakeTempDir("fl-round-policy");
  std::filesystem::create_directories(dir + "/models");
  TensorFile model;
  Tensor t{"w", DType::kF32, {4}, {}};
  EXPECT_TRUE(t.SetFromF32({1, 2, 3, 4}).ok());
  model.tensors.push_back(std::move(t));
  EXPECT_TRUE(WriteSafetensors(dir + "/models/init.safetensors", model).ok());
  testing::WriteFile(dir + "/exp.yaml", R"(name: fl-round-policy
objective: {metric: val_accuracy, goal: maximize}
federation:
  regions: [{name: east, clients: 2}, {name: west, clients: 2}]
  rounds: 5
  min_clients: 4
  round_deadline: 60s
  secure_aggregation: false
  client_command: [/bin/true]
  model: {file: models/init.safetensors}
)" + federation + (budget.empty() ? "" : "budget: " + budget + "\n"));
  RunOptions options;
  options.experiment_file = dir + "/exp.yaml";
  options.run_dir = dir + "/run";
  options.worker_binary = "/nonexistent/sextant-worker";  // never started
  FakeClock clock;
  std::ostringstream out, err;
  Ended e;
  const absl::Time start = clock.Now();
  {
    absl::StatusOr<std::unique_ptr<RunSession>> session =
        RunSession::Open(options, RunEnv{&clock, &launcher, &out, &err});
    if (!session.ok()) {
      e.status = session.status();
      return e;
    }
    ClockTicker ticker(&clock, absl::Milliseconds(100));
    e.status = RunFederated(**session);
    absl::StatusOr<v1::RunState> state = (*session)->store().GetRunState();
    if (state.ok()) e.state = *state;
  }
  e.elapsed = clock.Now() - start;
  e.out = out.str() + err.str();
  for (const std::vector<std::string>& argv : launcher.launched) {
    std::vector<std::string> shown;
    for (size_t i = 1; i + 1 < argv.size(); ++i) {
      if (argv[i] == "--role" || argv[i] == "--region" || argv[i] == "--index") {
        shown.push_back(argv[i] + " " + argv[i + 1]);
      }
    }
    e.launched.push_back(absl::StrJoin(shown, " "));
  }
  for (const auto& row : testing::QueryRows(
           dir + "/run/state.db", "SELECT message FROM events WHERE kind = 'federation_ready'")) {
    e.ready = row[0];
  }
  e.global_rows = static_cast<int>(
      testing::QueryRows(dir + "/run/state.db", "SELECT round FROM rounds WHERE region = ''")
          .size());
  return e;
}

// An aggregator that never listens: the run waits a minute of its clock for its port, then
// ends naming the region and its log, having started no client.
TEST(RoundPolicyTest, AnAggregatorThatNeverListensEndsTheRunNamingItsRegion) {
  testing::FakeLauncher launcher;
  const Ended e = RunOnFakeClock(launcher, "");
  EXPECT_EQ(e.status.code(), absl::StatusCode::kUnavailable) << e.status << e.out;
  EXPECT_THAT(e.status.message(), HasSubstr("the aggregator of region east did not start; see "));
  EXPECT_THAT(e.status.message(), HasSubstr("/aggregator-east.log"));
  EXPECT_EQ(e.launched, (std::vector<std::string>{"--role aggregator --region east",
                                                  "--role aggregator --region west"}));
  EXPECT_GE(e.elapsed, absl::Minutes(1));
  EXPECT_EQ(e.global_rows, 0);
}

// Every aggregator listens and every client is launched in its region, after its aggregator;
// none ever answers. The run waits for its regions (their startup wait and a minute), starts
// round 1's deadline afresh and says which regions were not up; the round stays open past its
// deadline (no region failed it), until budget.max_wall_time stops the run mid-round,
// BUDGET_EXHAUSTED after round 0, its model as it was.
TEST(RoundPolicyTest, ARoundNoRegionAnswersStaysOpenUntilTheWallTimeBudgetStopsTheRun) {
  ListeningAggregators launcher;
  const Ended e = RunOnFakeClock(launcher, "{max_wall_time: 8m}");
  EXPECT_TRUE(e.status.ok()) << e.status << e.out;
  EXPECT_EQ(e.state, v1::RUN_BUDGET_EXHAUSTED) << e.out;
  EXPECT_EQ(e.launched,
            (std::vector<std::string>{
                "--role aggregator --region east", "--role aggregator --region west",
                "--role client --region east --index 0", "--role client --region east --index 1",
                "--role client --region west --index 0", "--role client --region west --index 1"}));
  EXPECT_EQ(e.ready, "regions not up when round 1's deadline started: east, west") << e.out;
  EXPECT_THAT(e.out, HasSubstr("sextant: round 1: the deadline passed with 0 client updates in"));
  EXPECT_THAT(e.out, HasSubstr("sextant: stopped after round 0"));
  EXPECT_EQ(e.out.find("round 1 failed"), std::string::npos) << e.out;
  EXPECT_GE(e.elapsed, absl::Minutes(8));
  EXPECT_LT(e.elapsed, absl::Minutes(10)) << e.out;
  EXPECT_EQ(e.global_rows, 0);
}

// ... but not for ever: 10 round deadlines (at least 5 minutes) after it said the deadline had
// passed, the round stops waiting and fails with what it has (nothing), and max_failed_rounds
// (1 here) such rounds in a row end the run FAILED, naming the round. Without a budget.
TEST(RoundPolicyTest, ARoundNoRegionAnswersFailsTenDeadlinesAfterItsDeadline) {
  ListeningAggregators launcher;
  const Ended e = RunOnFakeClock(launcher, "", "  max_failed_rounds: 1\n");
  EXPECT_TRUE(absl::IsAborted(e.status)) << e.status << e.out;
  EXPECT_THAT(e.status.message(), HasSubstr("round 1 failed: 0 client updates of min_clients 4"));
  EXPECT_EQ(e.state, v1::RUN_FAILED) << e.out;
  EXPECT_THAT(e.out, HasSubstr("sextant: round 1: no more updates came in 10m after its "
                               "deadline; it closes with what it has"));
  // The regions' wait (3 minutes), round 1's deadline (1), then 10 more.
  EXPECT_GE(e.elapsed, absl::Minutes(14));
  EXPECT_LT(e.elapsed, absl::Minutes(17)) << e.out;
  EXPECT_EQ(e.global_rows, 0);
}

// budget.max_wall_time on the run's clock: two minutes pass while it waits for its regions,
// and the run stops BUDGET_EXHAUSTED after round 0, resumable, with a status that is OK.
TEST(RoundPolicyTest, TheWallTimeBudgetStopsTheRunWhileItWaitsForItsRegions) {
  ListeningAggregators launcher;
  const Ended e = RunOnFakeClock(launcher, "{max_wall_time: 2m}");
  EXPECT_TRUE(e.status.ok()) << e.status << e.out;
  EXPECT_EQ(e.state, v1::RUN_BUDGET_EXHAUSTED) << e.out;
  EXPECT_THAT(e.out, HasSubstr("sextant: stopped after round 0"));
  EXPECT_EQ(e.ready, "") << e.out;  // stopped before the regions' wait ended
  EXPECT_GE(e.elapsed, absl::Minutes(2));
  EXPECT_LT(e.elapsed, absl::Minutes(4)) << e.out;
  // Stopped once: the wait for the regions ends the run, not the round loop after it.
  const size_t stopped = e.out.find("sextant: stopped after round 0");
  EXPECT_EQ(e.out.find("sextant: stopped", stopped + 1), std::string::npos) << e.out;
  EXPECT_EQ(e.out.find("round 1:"), std::string::npos) << e.out;
  EXPECT_EQ(e.global_rows, 0);
}

}  // namespace
}  // namespace sextant
