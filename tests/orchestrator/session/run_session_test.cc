// RunSession: what the search and federated loops share, opened on real run directories (a
// real SQLite store, the real lock) with a FakeClock.
#include "orchestrator/session/run_session.h"

#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/local_launcher.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::MakeTempDir;
using ::testing::StartsWith;
using testing::WriteFile;

constexpr char kSearch[] = R"(name: session
objective: {metric: loss, goal: minimize}
parameters:
  x: {type: float, min: 0, max: 1}
search: {sampler: random, max_trials: 3}
trial:
  command: [echo, "loss=1"]
)";

class RunSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("run-session");
    launcher_ = NewPosixProcessLauncher();
    env_ = RunEnv{&clock_, launcher_.get(), &out_, &err_};
  }
  void TearDown() override { unsetenv("SEXTANT_FEDERATED_TRIAL"); }

  RunOptions NewRun(const std::string& yaml) {
    WriteFile(dir_ + "/exp.yaml", yaml);
    RunOptions o;
    o.experiment_file = dir_ + "/exp.yaml";
    o.run_dir = dir_ + "/run";
    return o;
  }
  RunOptions Resume() {
    RunOptions o;
    o.resume = true;
    o.run_dir = dir_ + "/run";
    return o;
  }

  std::string dir_;
  FakeClock clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<ProcessLauncher> launcher_;
  std::ostringstream out_, err_;
  RunEnv env_;
};

TEST_F(RunSessionTest, NewRunStoresItsSpecOnceWithAbsolutePathsAndItsStart) {
  auto session = RunSession::Open(NewRun(kSearch), env_);
  ASSERT_TRUE(session.ok()) << session.status();
  RunSession& s = **session;
  EXPECT_FALSE(s.federated());
  EXPECT_FALSE(s.resumed());
  EXPECT_EQ(s.path(), dir_ + "/run");
  EXPECT_EQ(s.spec().name(), "session");
  EXPECT_TRUE(std::filesystem::path(s.spec().trial().working_dir()).is_absolute());
  auto stored = s.store().GetMeta("spec");
  ASSERT_TRUE(stored.ok() && *stored);
  v1::ExperimentSpec spec;
  ASSERT_TRUE(spec.ParseFromString(**stored));
  EXPECT_EQ(spec.SerializeAsString(), s.spec().SerializeAsString());
  auto started = s.store().GetMeta("started_at");
  ASSERT_TRUE(started.ok() && *started);
  EXPECT_EQ(**started, "1800000000.000000");  // the injected clock's time, to the microsecond
  // Loopback: fresh secrets only this user can read, and no live report without the flag.
  EXPECT_TRUE(std::filesystem::exists(s.secrets().worker_file));
  EXPECT_TRUE(s.security().local);
  EXPECT_TRUE(s.tls_dir().empty());
  EXPECT_EQ(s.monitor(), nullptr);
}

TEST_F(RunSessionTest, ExperimentThatDoesNotLoadGivesItsLinesAndExitTwo) {
  auto session =
      RunSession::Open(NewRun("name: bad\nobjective: {metric: loss, goal: sideways}\n"), env_);
  ASSERT_FALSE(session.ok());
  EXPECT_TRUE(IsLoadError(session.status()));
  std::ostringstream err;
  EXPECT_EQ(ExitCode(session.status(), err), 2);
  // Every error, each FILE:LINE:COL as the loader says it, with no prefix.
  EXPECT_THAT(err.str(), StartsWith(dir_ + "/exp.yaml:1:1: parameters: required key is missing\n"));
  EXPECT_THAT(err.str(),
              HasSubstr("\n" + dir_ + "/exp.yaml:2:33: objective.goal: unknown goal 'sideways'"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/run/state.db"));  // nothing was created
}

TEST_F(RunSessionTest, LockedDirectoryIsRefusedAndAFinishedOneIsNotStartedAgain) {
  auto first = RunSession::Open(NewRun(kSearch), env_);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = RunSession::Open(NewRun(kSearch), env_);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  first->reset();  // the lock goes with the session
  auto again = RunSession::Open(NewRun(kSearch), env_);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(again.status()));
  EXPECT_THAT(std::string(again.status().message()),
              HasSubstr("already holds a run; continue it with `sextant resume"));
}

TEST_F(RunSessionTest, ResumeReadsTheStoredSpecAndKeepsARaisedBudget) {
  ASSERT_TRUE(RunSession::Open(NewRun(kSearch), env_).ok());
  // The file changes after the run started: a resume still runs what was stored.
  WriteFile(dir_ + "/exp.yaml", "garbage: [");
  RunOptions o = Resume();
  o.max_cost = 12.5;
  auto resumed = RunSession::Open(o, env_);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_TRUE((*resumed)->resumed());
  EXPECT_EQ((*resumed)->spec().name(), "session");
  EXPECT_EQ((*resumed)->spec().budget().max_cost(), 12.5);
  v1::ExperimentSpec stored;
  ASSERT_TRUE(stored.ParseFromString(**(*resumed)->store().GetMeta("spec")));
  EXPECT_EQ(stored.budget().max_cost(), 12.5);
}

TEST_F(RunSessionTest, ResumeOfADirectoryWithoutARunSaysSo) {
  RunOptions o = Resume();
  o.run_dir = dir_ + "/nothing-here";
  auto session = RunSession::Open(o, env_);
  ASSERT_FALSE(session.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(session.status()));
  EXPECT_THAT(std::string(session.status().message()),
              HasSubstr("is not a Sextant run directory (no state.db)"));
  EXPECT_FALSE(std::filesystem::exists(o.run_dir));
}

TEST_F(RunSessionTest, ListeningBeyondLoopbackWithoutTlsIsRefused) {
  RunOptions o = NewRun(kSearch);
  o.listen = "0.0.0.0:0";
  auto session = RunSession::Open(o, env_);
  ASSERT_FALSE(session.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(session.status()));
  EXPECT_THAT(std::string(session.status().message()), HasSubstr("--tls-dir"));
  o.tls_dir = dir_ + "/no-certs";
  o.run_dir = dir_ + "/run2";
  session = RunSession::Open(o, env_);
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(std::string(session.status().message()), StartsWith("--tls-dir: "));
}

TEST_F(RunSessionTest, FederatedExperimentIsSaidToBeOne) {
  auto session = RunSession::Open(NewRun(R"(name: fed
objective: {metric: val_accuracy, goal: maximize}
trial:
  builtin: {model: mlp, dataset: fashion-mnist}
federation:
  regions: [{name: east, clients: 2}]
  rounds: 2
)"),
                                  env_);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_TRUE((*session)->federated());
}

TEST_F(RunSessionTest, AFederatedSearchTrialRunsItsParametersAndItsRetryContinues) {
  const std::string yaml = R"(name: fedsearch
objective: {metric: val_accuracy, goal: maximize}
parameters:
  local_lr: {type: float, min: 0.001, max: 0.1, log: true}
search: {sampler: random, max_trials: 2}
trial:
  builtin: {model: mlp, dataset: fashion-mnist}
federation:
  regions: [{name: east, clients: 2}]
  rounds: 2
)";
  setenv("SEXTANT_FEDERATED_TRIAL", "1", 1);
  setenv("SEXTANT_PARAM_LOCAL_LR", "0.025", 1);
  {
    auto first = RunSession::Open(NewRun(yaml), env_);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_TRUE((*first)->federated());
    EXPECT_FALSE((*first)->resumed());
    EXPECT_DOUBLE_EQ((*first)->spec().federation().local_lr(), 0.025);
  }
  auto retry = RunSession::Open(NewRun(yaml), env_);  // the trial's next attempt
  unsetenv("SEXTANT_PARAM_LOCAL_LR");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE((*retry)->resumed());
  EXPECT_DOUBLE_EQ((*retry)->spec().federation().local_lr(), 0.025);
}

TEST_F(RunSessionTest, WorkersAreTheGivenBinaryOrTheOneBesideThisExecutable) {
  RunOptions o = NewRun(kSearch);
  auto beside = RunSession::Open(o, env_);
  ASSERT_TRUE(beside.ok()) << beside.status();
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  EXPECT_EQ((*beside)->worker_binary(), self.parent_path().string() + "/sextant-worker");
  beside->reset();
  o.run_dir = dir_ + "/run2";
  o.worker_binary = "/opt/sextant/bin/sextant-worker";
  auto given = RunSession::Open(o, env_);
  ASSERT_TRUE(given.ok()) << given.status();
  EXPECT_EQ((*given)->worker_binary(), "/opt/sextant/bin/sextant-worker");
}

TEST_F(RunSessionTest, ExitCodesFollowTheContract) {
  std::ostringstream err;
  EXPECT_EQ(ExitCode(absl::OkStatus(), err), 0);
  EXPECT_EQ(ExitCode(absl::CancelledError("interrupted"), err), 130);
  EXPECT_EQ(err.str(), "");  // the loop has said how it stopped
  EXPECT_EQ(ExitCode(absl::InvalidArgumentError("bad flag"), err), 2);
  EXPECT_EQ(ExitCode(absl::UnavailableError("every local worker has exited"), err), 1);
  EXPECT_EQ(err.str(), "sextant: bad flag\nsextant: every local worker has exited\n");
}

TEST_F(RunSessionTest, AStopRequestIsSeenByTheSession) {
  auto session = RunSession::Open(NewRun(kSearch), env_);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ((*session)->stop_signal(), 0);
  RunSession::RequestStop(SIGTERM);
  EXPECT_EQ((*session)->stop_signal(), SIGTERM);
  RunSession::RequestStop(0);
}

}  // namespace
}  // namespace sextant
