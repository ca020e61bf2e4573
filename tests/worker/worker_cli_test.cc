// The sextant-worker command line (CLI11): --help, subcommands, and usage errors with exit 2,
// for the trial worker and the federated roles. Runs the real binary.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sextant/v1/experiment.pb.h"
#include "worker/federated/federated_main.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kWorker = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";

struct Output {
  int exit_code = -1;
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs sextant-worker with args to completion, stdout and stderr captured.
Output RunWorker(const std::vector<std::string>& args) {
  const std::string dir = std::string(::testing::TempDir()) + "/worker_cli_" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name();
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/stdout", err = dir + "/stderr";
  pid_t pid = fork();
  if (pid == 0) {
    int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(o, 1);
    dup2(e, 2);
    std::vector<char*> argv = {const_cast<char*>(kWorker.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kWorker.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out), Slurp(err)};
}

TEST(WorkerCliTest, HelpListsTheFlagsAndSubcommandsAndExitsZero) {
  Output r = RunWorker({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* flag :
       {"--connect", "--region", "--pool", "--gpus", "--preempt-notice", "--tls-dir", "--tls-name",
        "--secret-file", "--role", "--exit-with-parent", "devices", "train"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
}

TEST(WorkerCliTest, UnknownFlagIsAUsageErrorWithExitCodeTwo) {
  Output r = RunWorker({"--connect", "127.0.0.1:1", "--bogus"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("sextant-worker: "));
  EXPECT_THAT(r.err, HasSubstr("--bogus"));
  EXPECT_THAT(r.err, HasSubstr("sextant-worker --help"));
  EXPECT_EQ(r.out, "");
}

TEST(WorkerCliTest, FlagWithoutItsValueIsAUsageError) {
  Output r = RunWorker({"--connect"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--connect"));
}

TEST(WorkerCliTest, MissingConnectIsAUsageError) {
  Output r = RunWorker({"--region", "east"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--connect HOST:PORT is required"));
}

TEST(WorkerCliTest, BadValuesAreUsageErrors) {
  Output notice = RunWorker({"--connect", "127.0.0.1:1", "--preempt-notice", "-1"});
  EXPECT_EQ(notice.exit_code, 2);
  EXPECT_THAT(notice.err, HasSubstr("--preempt-notice takes seconds >= 0"));
  Output version = RunWorker({"--connect", "127.0.0.1:1", "--protocol-version", "two"});
  EXPECT_EQ(version.exit_code, 2);
  EXPECT_THAT(version.err, HasSubstr("--protocol-version"));
  Output role = RunWorker({"--connect", "127.0.0.1:1", "--role", "boss"});
  EXPECT_EQ(role.exit_code, 2);
  EXPECT_THAT(role.err, HasSubstr("--role boss"));
}

TEST(WorkerCliTest, DevicesListsTheGpus) {
  Output r = RunWorker({"devices"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("cuda_built="));
}

TEST(WorkerCliTest, TrainHandsEveryArgumentToTheTrainer) {
  Output help = RunWorker({"train", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_THAT(help.out, HasSubstr("Usage: sextant-worker train"));
  EXPECT_THAT(help.out, HasSubstr("--batch-size"));
  Output bad = RunWorker({"train", "--bogus", "1"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("unknown option '--bogus'"));
  EXPECT_THAT(bad.err, HasSubstr("sextant-worker train --help"));
  EXPECT_THAT(bad.err, Not(HasSubstr("sextant-worker --help")));  // the trainer's own message
}

TEST(WorkerCliTest, FederatedRoleHelpListsItsFlags) {
  Output r = RunWorker({"--role", "aggregator", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* flag : {"--model-size", "--work-dir", "--listen", "--port-file",
                           "--startup-wait", "--spec", "--index", "--join"}) {
    EXPECT_THAT(r.out, HasSubstr(flag));
  }
  // An aggregator's settings come from the experiment, not from flags.
  for (const char* gone : {"--aggregation", "--secure-aggregation", "--clients", "--dp-clip-norm",
                           "--max-staleness"}) {
    EXPECT_THAT(r.out, Not(HasSubstr(gone)));
  }
}

TEST(WorkerCliTest, FederatedRoleUnknownFlagIsAUsageErrorWithExitCodeTwo) {
  Output r = RunWorker({"--role", "aggregator", "--region", "east", "--connect", "127.0.0.1:1",
                        "--experiment-id", "x", "--model-size", "4", "--bogus", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("sextant-worker: "));
  EXPECT_THAT(r.err, HasSubstr("--bogus"));
  EXPECT_THAT(r.err, HasSubstr("--help"));
}

TEST(WorkerCliTest, FederatedRoleFlagWithoutItsValueIsAUsageError) {
  Output r = RunWorker({"--role", "aggregator", "--region"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--region"));
  Output missing = RunWorker({"--role", "aggregator", "--connect", "127.0.0.1:1"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_THAT(missing.err, HasSubstr("is required for a federated role"));
}

TEST(WorkerCliTest, AggregatorArgumentsAreCheckedBeforeItStarts) {
  const std::vector<std::string> base = {
      "--role=aggregator", "--region", "east",           "--connect",  "127.0.0.1:1",
      "--experiment-id",   "x",        "--model-size=4", "--work-dir", ::testing::TempDir()};
  // Without the experiment it has no settings.
  Output none = RunWorker(base);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("an aggregator needs --spec FILE"));
  // An experiment without its region.
  v1::ExperimentSpec spec;
  spec.mutable_federation()->add_regions()->set_name("west");
  const std::string file = ::testing::TempDir() + "/aggregator-west.pb";
  std::ofstream(file, std::ios::binary) << spec.SerializeAsString();
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--spec", file});
  Output west = RunWorker(args);
  EXPECT_EQ(west.exit_code, 2);
  EXPECT_THAT(west.err, HasSubstr("has no region"));
  EXPECT_THAT(west.err, HasSubstr(file));
  // A value of the wrong kind.
  args.insert(args.end(), {"--startup-wait", "a-third"});
  Output wait = RunWorker(args);
  EXPECT_EQ(wait.exit_code, 2);
  EXPECT_THAT(wait.err, HasSubstr("--startup-wait"));
}

TEST(IsFederatedInvocationTest, RolesAndBothFlagForms) {
  auto federated = [](std::vector<std::string> args) {
    args.insert(args.begin(), "sextant-worker");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return IsFederatedInvocation(static_cast<int>(argv.size()), argv.data());
  };
  EXPECT_TRUE(federated({"--role", "aggregator"}));
  EXPECT_TRUE(federated({"--role=evaluator"}));
  EXPECT_TRUE(federated({"--role", "client", "--spec", "f"}));
  EXPECT_TRUE(federated({"--spec=f", "--role=client"}));
  EXPECT_TRUE(federated({"--role", "client", "--join", "--connect", "h:1"}));
  EXPECT_TRUE(federated({"--role", "worker", "--role", "aggregator"}));  // the last one counts
  EXPECT_FALSE(federated({"--role", "client", "--connect", "h:1"}));
  EXPECT_FALSE(federated({"--connect", "h:1"}));
  EXPECT_FALSE(federated({"--connect", "h:1", "--help"}));
  EXPECT_FALSE(federated({"--role"}));  // no value: the trial worker's parser says so
}

}  // namespace
}  // namespace sextant
