// How a run ends and what it keeps, through the real binaries: the failure policy of a search
// (a run whose trials keep failing ends FAILED with exit 1, quoting the error), more trials for
// a run on resume, an ask that only a tell can answer, and times stored exactly.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::MakeTempDir;
using testing::QueryRows;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";

std::string Search(const std::string& name, int trials, const std::string& command,
                   const std::string& search_extra = "") {
  return absl::StrCat("name: ", name, R"(
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: random, seed: 3, max_trials: )",
                      trials, ", max_concurrent: 2", search_extra, R"(}
trial:
  command: )",
                      command, "\n");
}

nlohmann::json Results(const std::string& run_dir) {
  auto r = RunProcess({kSextant, "results", run_dir, "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

int Count(const nlohmann::json& results, const std::string& state) {
  int n = 0;
  for (const auto& t : results["trials"]) n += t["state"] == state;
  return n;
}

class RunOutcomeTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("outcome"); }
  std::string dir_;
};

TEST_F(RunOutcomeTest, EveryTrialFailingEndsTheRunFailedAndNamesTheMetricsReported) {
  // The objective is `loss`; the script prints `val_loss`: every trial fails the same way, but
  // 4 trials are below both bounds, so the run ends when they have all failed.
  WriteFile(dir_ + "/t.sh", "#!/bin/sh\necho \"epoch=1 val_loss=0.5\"\n");
  WriteFile(dir_ + "/exp.yaml", Search("mismatch", 4, "[sh, t.sh]"));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("the run failed: every trial failed (4 of 4)"));
  EXPECT_THAT(r.err, HasSubstr("never reported the objective metric 'loss'"));
  EXPECT_THAT(r.err, HasSubstr("it reported: epoch, val_loss"));
  EXPECT_THAT(r.out, HasSubstr("sextant: trial 1 failed: "));
  EXPECT_THAT(r.out, HasSubstr("4 FAILED"));
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_EQ(Count(j, "FAILED"), 4);
  auto finished = QueryRows(dir_ + "/run/state.db",
                            "SELECT message FROM events WHERE kind = 'run_finished'");
  ASSERT_EQ(finished.size(), 1u);
  EXPECT_THAT(finished[0][0], HasSubstr("FAILED: every trial failed"));
}

TEST_F(RunOutcomeTest, TrialsFailingInARowWithTheSameErrorStopTheRunEarly) {
  // A script path that does not exist: 1000 trials would all fail and be billed.
  WriteFile(dir_ + "/exp.yaml", Search("wrong-path", 1000, "[sh, no/such/train.sh]"));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  // run warns as validate does, before it launches anything.
  EXPECT_THAT(r.err, HasSubstr("warning: trial.command: no/such/train.sh does not exist"));
  EXPECT_THAT(r.err, HasSubstr("trials in a row failed with the same error"));
  EXPECT_THAT(r.err, HasSubstr("no/such/train.sh"));
  EXPECT_THAT(r.err, HasSubstr("search.max_failed_in_a_row: 5"));
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_GE(Count(j, "FAILED"), 5);
  // Stopped at once: no more than the failures plus the two that were running.
  EXPECT_LE(j["trials"].size(), 10u);
  EXPECT_EQ(Count(j, "RUNNING"), 0);  // cancelled, not left behind
}

// A run that failed goes on once its cause is fixed: the bounds count the resumed session's
// failures, not the ones that ended the run.
TEST_F(RunOutcomeTest, AFailedRunGoesOnOnceItsCauseIsFixed) {
  WriteFile(dir_ + "/exp.yaml", Search("fixed", 12, "[sh, train.sh]"));
  const std::string run = dir_ + "/run";
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("Once the cause is fixed, `sextant resume " + run + "` goes on"));
  const int failed = Count(Results(run), "FAILED");
  WriteFile(dir_ + "/train.sh", "#!/bin/sh\necho \"loss=$SEXTANT_PARAM_X\"\n");
  r = RunProcess({kSextant, "resume", run, "--max-trials", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = Results(run);
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(Count(j, "FAILED"), failed);  // kept as they were
  EXPECT_EQ(Count(j, "COMPLETED"), 16 - failed);
}

TEST_F(RunOutcomeTest, MaxFailedTrialsStopsARunWhoseTrialsFailEachTheirOwnWay) {
  // Trials fail with different errors (their exit status is their id), so none repeats in a
  // row; the total bound ends the run. Every third trial succeeds meanwhile.
  WriteFile(dir_ + "/t.sh", R"(#!/bin/sh
if [ $((SEXTANT_TRIAL_ID % 3)) -eq 0 ]; then echo "loss=$SEXTANT_PARAM_X"; exit 0; fi
exit $((SEXTANT_TRIAL_ID % 100 + 1))
)");
  WriteFile(dir_ + "/exp.yaml", Search("many-ways", 40, "[sh, t.sh]", ", max_failed_trials: 4"));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("trials failed (search.max_failed_trials: 4)"));
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_EQ(j["state"], "FAILED");
  EXPECT_GE(Count(j, "FAILED"), 4);
  EXPECT_LT(j["trials"].size(), 12u);
}

TEST_F(RunOutcomeTest, ASearchWithSomeFailedTrialsCompletesAsBefore) {
  // One trial in three fails: under both default bounds for 12 trials (5 in all, 5 in a row).
  WriteFile(dir_ + "/t.sh", R"(#!/bin/sh
if [ $((SEXTANT_TRIAL_ID % 3)) -eq 0 ]; then echo "diverged" >&2; exit 3; fi
echo "loss=$SEXTANT_PARAM_X"
)");
  WriteFile(dir_ + "/exp.yaml", Search("some-fail", 12, "[sh, t.sh]", ", max_failed_trials: 5"));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = Results(dir_ + "/run");
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(Count(j, "FAILED"), 4);
  EXPECT_EQ(Count(j, "COMPLETED"), 8);
}

TEST_F(RunOutcomeTest, FailureBoundsAreCheckedAtLoad) {
  WriteFile(dir_ + "/bad.yaml", Search("bad", 10, "[sh, t.sh]", ", max_failed_trials: 0"));
  auto r = RunProcess({kSextant, "validate", dir_ + "/bad.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("search.max_failed_trials"));
  WriteFile(dir_ + "/asktell.yaml",
            Search("bad", 10, "[sh, t.sh]", ", mode: ask_tell, max_failed_in_a_row: 3"));
  r = RunProcess({kSextant, "validate", dir_ + "/asktell.yaml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("only with mode: commands"));
}

TEST_F(RunOutcomeTest, ResumeWithMaxTrialsGivesAFinishedSearchMoreTrials) {
  WriteFile(dir_ + "/t.sh", "#!/bin/sh\necho \"loss=$SEXTANT_PARAM_X\"\n");
  WriteFile(dir_ + "/exp.yaml", Search("more", 3, "[sh, t.sh]"));
  const std::string run = dir_ + "/run";
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Results(run)["max_trials"], 3);

  r = RunProcess({kSextant, "resume", run});  // nothing left: it says how to go on
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("has no trial left to run (it has its 3 trials, "
                               "search.max_trials); give it room with `sextant resume " +
                               run + " --max-trials N`"));

  r = RunProcess({kSextant, "resume", run, "--max-trials", "2"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("--max-trials 2 is below the 3 trials"));

  r = RunProcess({kSextant, "resume", run, "--max-trials", "6"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = Results(run);
  EXPECT_EQ(j["state"], "COMPLETED");
  EXPECT_EQ(j["max_trials"], 6);
  EXPECT_EQ(Count(j, "COMPLETED"), 6);
  auto status = RunProcess({kSextant, "status", run});
  EXPECT_THAT(status.out, HasSubstr("6 trials of max_trials 6"));
  auto event = QueryRows(run + "/state.db", "SELECT message FROM events WHERE kind = 'max_trials'");
  ASSERT_EQ(event.size(), 1u);
  EXPECT_EQ(event[0][0], "search.max_trials set from 3 to 6 by resume --max-trials");
}

// An ask/tell run that has all its trials is given room the same way, and serves the next.
TEST_F(RunOutcomeTest, ResumeWithMaxTrialsGivesAnAskTellRunRoomToAskMore) {
  WriteFile(dir_ + "/exp.yaml", R"(name: asked
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {max_trials: 1, mode: ask_tell}
)");
  const std::string run = dir_ + "/run";
  {
    testing::BackgroundProcess serve({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
    ASSERT_TRUE(serve.WaitForOutput("serving ask/tell", 30)) << serve.out() << serve.err();
    ASSERT_EQ(RunProcess({kSextant, "ask", run}).exit_code, 0);
    ASSERT_EQ(RunProcess({kSextant, "tell", run, "1", "--value", "0.5"}).exit_code, 0);
    EXPECT_EQ(serve.Wait(30), 0) << serve.out() << serve.err();  // its only trial is told
  }
  auto ended = RunProcess({kSextant, "ask", run});
  EXPECT_THAT(ended.err, HasSubstr("sextant resume " + run + " --max-trials N"));
  testing::BackgroundProcess more({kSextant, "resume", run, "--max-trials", "2"});
  ASSERT_TRUE(more.WaitForOutput("serving ask/tell", 30)) << more.out() << more.err();
  auto asked = RunProcess({kSextant, "ask", run});
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_THAT(asked.out, HasSubstr("\"trial\":2"));
  ASSERT_EQ(RunProcess({kSextant, "tell", run, "2", "--value", "0.25"}).exit_code, 0);
  EXPECT_EQ(more.Wait(30), 0) << more.out() << more.err();
  EXPECT_EQ(Results(run)["max_trials"], 2);
  EXPECT_EQ(Count(Results(run), "COMPLETED"), 2);
}

TEST_F(RunOutcomeTest, AnAskThatOnlyATellCanAnswerReturnsAtOnceAndSaysSo) {
  WriteFile(dir_ + "/exp.yaml", R"(name: held
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {max_trials: 1, mode: ask_tell, lease: 10m}
)");
  const std::string run = dir_ + "/run";
  testing::BackgroundProcess serve({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
  ASSERT_TRUE(serve.WaitForOutput("serving ask/tell", 30)) << serve.out() << serve.err();
  auto r = RunProcess({kSextant, "ask", run});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"trial\":1"));

  // Trial 1 is asked and not told, and it is the run's only trial: a second ask that waits
  // would wait for the whole 10-minute lease.
  const auto start = std::chrono::steady_clock::now();
  r = RunProcess({kSextant, "ask", run, "--wait", "60"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_LT(seconds, 20);
  EXPECT_THAT(r.err, HasSubstr("waiting for trial 1 (its lease ends in 10 min), asked and not told"));
  EXPECT_THAT(r.err, HasSubstr("sextant resume " + run + " --max-trials N"));
  EXPECT_THAT(r.err, Not(HasSubstr("RUN_DIR")));
  serve.Signal(SIGINT);
  EXPECT_EQ(serve.Wait(30), 130) << serve.out() << serve.err();
}

TEST_F(RunOutcomeTest, RunTimesAreStoredExactlyAndRoundedOnesAreRepaired) {
  WriteFile(dir_ + "/t.sh", "#!/bin/sh\necho \"loss=$SEXTANT_PARAM_X\"\n");
  WriteFile(dir_ + "/exp.yaml", Search("times", 2, "[sh, t.sh]"));
  const std::string run = dir_ + "/run";
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", run});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string db = run + "/state.db";
  auto finished = QueryRows(db, "SELECT value FROM meta WHERE key = 'finished_at'");
  auto event = QueryRows(db, "SELECT printf('%.6f', time) FROM events WHERE kind = 'run_finished'");
  ASSERT_EQ(finished.size(), 1u);
  ASSERT_EQ(event.size(), 1u);
  EXPECT_EQ(finished[0][0], event[0][0]);  // to the microsecond
  auto started = QueryRows(db, "SELECT value FROM meta WHERE key = 'started_at'");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_THAT(started[0][0], ::testing::MatchesRegex("[0-9]{10}\\.[0-9]{6}"));

  // A run written by an older version kept 6 significant digits: the next writable open puts
  // back the exact times its records hold.
  r = RunProcess({"python3", "-c",
                  absl::StrCat("import sqlite3; c = sqlite3.connect('", db,
                               "'); c.execute(\"UPDATE meta SET value = '1.79636e+09' WHERE key "
                               "IN ('started_at', 'finished_at')\"); c.commit()")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunProcess({kSextant, "resume", run});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  started = QueryRows(db, "SELECT value FROM meta WHERE key = 'started_at'");
  auto first = QueryRows(db, "SELECT printf('%.6f', MIN(created_at)) FROM trials");
  ASSERT_EQ(started.size(), 1u);
  double repaired = 0, trial_created = 0;
  ASSERT_TRUE(absl::SimpleAtod(started[0][0], &repaired)) << started[0][0];
  ASSERT_TRUE(absl::SimpleAtod(first[0][0], &trial_created));
  EXPECT_LE(repaired, trial_created);
  EXPECT_GT(repaired, trial_created - 60);  // not the rounded 1,796,360,000
}

TEST_F(RunOutcomeTest, CsvValuesAreExactAsInJson) {
  WriteFile(dir_ + "/t.sh", "#!/bin/sh\necho \"loss=-3.274409774458036\"\n");
  WriteFile(dir_ + "/exp.yaml", Search("exact", 1, "[sh, t.sh]"));
  auto r = RunProcess({kSextant, "run", dir_ + "/exp.yaml", "--run-dir", dir_ + "/run"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = RunProcess({kSextant, "results", dir_ + "/run", "--format", "csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr(",-3.274409774458036,"));
  EXPECT_EQ(Results(dir_ + "/run")["trials"][0]["value"].get<double>(), -3.274409774458036);
}

}  // namespace
}  // namespace sextant
