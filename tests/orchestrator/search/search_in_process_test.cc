// RunSearch in this process, on the clock the session is given: the search loop, its
// dispatcher's leases and its budget read the time from it, while its workers and trials are
// real processes on the real clock. A clock ten times fast passes the search's one-minute
// wall-time budget in about 6 s, and the search ends BUDGET_EXHAUSTED with trials left.
#include "orchestrator/search/search_run.h"

#include <chrono>
#include <memory>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/core/store.h"
#include "orchestrator/session/run_session.h"
#include "tests/fakes/scaled_clock.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

struct InProcessSearch {
  absl::Status status;
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
  int completed = 0;  // trials COMPLETED in the store
  double real_seconds = 0;
  absl::Duration clock_elapsed;
  std::string out, err;
};

// A random search of `max_trials` trials, each `sleep` real seconds, under budget.max_wall_time
// `wall`, through RunSession and RunSearch here on the real clock run `scale` times fast.
InProcessSearch SearchHere(int max_trials, const std::string& sleep, const std::string& wall,
                           double scale) {
  const std::string dir = testing::MakeTempDir("search-in-process");
  testing::WriteFile(dir + "/exp.yaml", "name: search-in-process\n"
                                        "objective: {metric: loss, goal: minimize}\n"
                                        "parameters:\n"
                                        "  x: {type: float, min: -5, max: 5}\n"
                                        "search: {sampler: random, seed: 3, max_trials: " +
                                            std::to_string(max_trials) +
                                            ", max_concurrent: 2}\n"
                                            "trial:\n"
                                            "  command: [sh, -c, \"sleep " +
                                            sleep +
                                            "; echo loss=${x}\"]\n"
                                            "  timeout: 10m\n"
                                            "budget: {max_wall_time: " +
                                            wall + "}\n");
  ScaledClock clock(scale);
  std::unique_ptr<ProcessLauncher> launcher = NewPosixProcessLauncher();
  std::ostringstream out, err;
  RunOptions options;
  options.experiment_file = dir + "/exp.yaml";
  options.run_dir = dir + "/run";
  options.worker_binary = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";
  // The workers heartbeat on the real clock: a lease of the run's clock must outlast a beat.
  options.lease_seconds = 15 * scale;
  InProcessSearch r;
  const absl::Time clock_start = clock.Now();
  const auto real_start = std::chrono::steady_clock::now();
  {
    absl::StatusOr<std::unique_ptr<RunSession>> session =
        RunSession::Open(options, RunEnv{&clock, launcher.get(), &out, &err});
    if (!session.ok()) {
      r.status = session.status();
      return r;
    }
    r.status = RunSearch(**session);
    absl::StatusOr<v1::RunState> state = (*session)->store().GetRunState();
    if (state.ok()) r.state = *state;
  }
  r.real_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start).count();
  r.clock_elapsed = clock.Now() - clock_start;
  r.completed = static_cast<int>(
      testing::QueryRows(dir + "/run/state.db", "SELECT id FROM trials WHERE state = 'COMPLETED'")
          .size());
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(SearchInProcessTest, RunsItsTrialsOnTheClockItIsGiven) {
  const InProcessSearch r = SearchHere(6, "0", "1h", 1);
  ASSERT_TRUE(r.status.ok()) << r.status << "\n" << r.out << r.err;
  EXPECT_EQ(r.state, v1::RUN_COMPLETED) << r.out;
  EXPECT_EQ(r.completed, 6) << r.out;
}

TEST(SearchInProcessTest, AFastClockPassesTheWallTimeBudgetAndTheSearchEndsBudgetExhausted) {
  // Trials of a real second each, two at a time: 200 of them would take 100 s. Ten seconds of
  // the run's clock per real second end its minute after about 6 s.
  const InProcessSearch r = SearchHere(200, "1", "1m", 10);
  ASSERT_TRUE(r.status.ok()) << r.status << "\n" << r.out << r.err;
  EXPECT_EQ(r.state, v1::RUN_BUDGET_EXHAUSTED) << r.out << r.err;
  EXPECT_GE(r.clock_elapsed, absl::Minutes(1));
  EXPECT_LT(r.real_seconds, 60) << r.out;
  EXPECT_LT(r.completed, 200) << r.out;
}

}  // namespace
}  // namespace sextant
