// RunSearch in this process, on the clock the session is given: the search loop, its
// dispatcher's leases and its budget read the time from it, while its workers and trials are
// real processes on the real clock. A clock ten times fast passes the search's one-minute
// wall-time budget in about 6 s, and the search ends BUDGET_EXHAUSTED with trials left.
#include "orchestrator/search/search_run.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
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
Search SearchHere(int max_trials, const std::string& sleep, const std::string& wall,
                  double scale) {
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

}  // namespace
}  // namespace sextant
