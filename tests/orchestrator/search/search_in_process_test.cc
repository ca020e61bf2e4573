// RunSearch in this process, on the clock the session is given: the search loop, its
// dispatcher's leases and its budget read the time from it, while its workers and trials are
// real processes on the real clock. A clock ten times fast passes the search's one-minute
// wall-time budget in about 6 s, and the search ends BUDGET_EXHAUSTED with trials left. On a
// FakeClock with a launcher that starts nothing, the same loop runs without any process.
#include "orchestrator/search/search_run.h"

#include <signal.h>

#include <string>

#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "tests/fakes/fake_launcher.h"
#include "tests/orchestrator/in_process_run.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

// A search run here, and its trials COMPLETED in the store.
struct Search {
  testing::InProcessRun run;
  int completed = 0;
};

// A random search of `max_trials` trials, each `sleep` real seconds, under budget.max_wall_time
// `wall`, through RunSession and RunSearch here on the real clock run `scale` times fast.
Search SearchHere(int max_trials, const std::string& sleep, const std::string& wall, double scale) {
  const std::string dir = testing::MakeTempDir("search-in-process");
  testing::WriteFile(dir + "/exp.yaml",
                     absl::StrCat("name: search-in-process\n"
                                  "objective: {metric: loss, goal: minimize}\n"
                                  "parameters:\n"
                                  "  x: {type: float, min: -5, max: 5}\n"
                                  "search: {sampler: random, seed: 3, max_trials: ",
                                  max_trials,
                                  ", max_concurrent: 2}\n"
                                  "trial:\n"
                                  "  command: [sh, -c, \"sleep ",
                                  sleep,
                                  "; echo loss=${x}\"]\n"
                                  "  timeout: 10m\n"
                                  "budget: {max_wall_time: ",
                                  wall, "}\n"));
  RunOptions options;
  options.experiment_file = dir + "/exp.yaml";
  options.run_dir = dir + "/run";
  // The workers heartbeat on the real clock: a lease of the run's clock must outlast a beat.
  options.lease_seconds = 15 * scale;
  Search r;
  r.run = testing::RunInProcess(options, scale, RunSearch);
  r.completed = static_cast<int>(
      testing::QueryRows(dir + "/run/state.db", "SELECT id FROM trials WHERE state = 'COMPLETED'")
          .size());
  return r;
}

TEST(SearchInProcessTest, RunsItsTrialsOnTheClockItIsGiven) {
  const Search s = SearchHere(6, "0", "1h", 1);
  const testing::InProcessRun& r = s.run;
  ASSERT_TRUE(r.status.ok()) << r.status << "\n" << r.out << r.err;
  EXPECT_EQ(r.state, v1::RUN_COMPLETED) << r.out;
  EXPECT_EQ(s.completed, 6) << r.out;
}

TEST(SearchInProcessTest, AFastClockPassesTheWallTimeBudgetAndTheSearchEndsBudgetExhausted) {
  // Trials of a real second each, two at a time: 200 of them would take 100 s. Ten seconds of
  // the run's clock per real second end its minute after about 6 s.
  const Search s = SearchHere(200, "1", "1m", 10);
  const testing::InProcessRun& r = s.run;
  ASSERT_TRUE(r.status.ok()) << r.status << "\n" << r.out << r.err;
  EXPECT_EQ(r.state, v1::RUN_BUDGET_EXHAUSTED) << r.out << r.err;
  EXPECT_GE(r.clock_elapsed, absl::Minutes(1));
  EXPECT_LT(r.real_seconds, 60) << r.out;
  EXPECT_LT(s.completed, 200) << r.out;
}

// On a FakeClock, with a launcher that starts nothing: the search loop asks for its local
// workers (one per max_concurrent, each with its launch token, its preemption notice and
// exit-with-parent), none ever registers, so no trial is made, and the wall-time budget on
// the run's clock ends the search BUDGET_EXHAUSTED; its workers are then told to stop and,
// as they do not, killed. No process runs and no wait takes real time.
TEST(SearchInProcessTest, OnAFakeClockTheBudgetEndsASearchWhoseWorkersNeverCame) {
  const std::string dir = testing::MakeTempDir("search-fake-clock");
  testing::WriteFile(dir + "/exp.yaml",
                     "name: search-fake-clock\n"
                     "objective: {metric: loss, goal: minimize}\n"
                     "parameters:\n"
                     "  x: {type: float, min: -5, max: 5}\n"
                     "search: {sampler: random, seed: 3, max_trials: 10, max_concurrent: 2}\n"
                     "trial:\n"
                     "  command: [sh, -c, \"echo loss=${x}\"]\n"
                     "budget: {max_wall_time: 1m}\n");
  RunOptions options;
  options.experiment_file = dir + "/exp.yaml";
  options.run_dir = dir + "/run";
  options.worker_binary = "/nonexistent/sextant-worker";  // never started
  FakeClock clock;
  testing::FakeLauncher launcher;
  std::ostringstream out, err;
  const absl::Time start = clock.Now();
  absl::Status status;
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
  {
    absl::StatusOr<std::unique_ptr<RunSession>> session =
        RunSession::Open(options, RunEnv{&clock, &launcher, &out, &err});
    ASSERT_TRUE(session.ok()) << session.status();
    status = RunSearch(**session);
    state = *(*session)->store().GetRunState();
  }
  EXPECT_TRUE(status.ok()) << status << out.str() << err.str();
  EXPECT_EQ(state, v1::RUN_BUDGET_EXHAUSTED) << out.str();
  EXPECT_GE(clock.Now() - start, absl::Minutes(1));
  EXPECT_LT(clock.Now() - start, absl::Minutes(2)) << out.str();
  ASSERT_EQ(launcher.launched.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const std::vector<std::string>& argv = launcher.launched[i];
    EXPECT_EQ(argv[0], "/nonexistent/sextant-worker");
    const std::string line = absl::StrJoin(argv, " ");
    EXPECT_NE(line.find(absl::StrCat("--launch-token local-", i)), std::string::npos) << line;
    EXPECT_NE(line.find("--preempt-notice 10"), std::string::npos) << line;
    EXPECT_NE(line.find("--exit-with-parent"), std::string::npos) << line;
    EXPECT_EQ(launcher.logs[i], absl::StrCat(dir, "/run/logs/worker-", i, ".log"));
  }
  // Asked to stop (SIGINT), then killed: they never exit.
  bool interrupted = false, killed = false;
  for (const auto& [pid, sig] : launcher.signals) {
    interrupted = interrupted || sig == SIGINT;
    killed = killed || sig == SIGKILL;
  }
  EXPECT_TRUE(interrupted && killed);
  EXPECT_TRUE(testing::QueryRows(dir + "/run/state.db", "SELECT id FROM trials").empty());
}

}  // namespace
}  // namespace sextant
