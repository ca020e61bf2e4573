#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/cuda/device_query.h"
#include "worker/train/train_command.h"

namespace sextant::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kTrainer = std::string(SEXTANT_BIN_DIR) + "/sextant-train";

std::string TempDir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string dir = std::string(::testing::TempDir()) + "/cmd_" + info->name() + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Starts the trainer with stdout and stderr sent to files in `dir`.
pid_t Start(const std::vector<std::string>& args, const std::string& dir) {
  pid_t pid = fork();
  if (pid == 0) {
    int out = open((dir + "/stdout").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int err = open((dir + "/stderr").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kTrainer.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kTrainer.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

int Wait(pid_t pid, bool* signaled = nullptr) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (signaled != nullptr) *signaled = WIFSIGNALED(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

int RunToEnd(const std::vector<std::string>& args, const std::string& dir) {
  return Wait(Start(args, dir));
}

// A synthetic run long enough (about 560 steps) to be interrupted.
std::vector<std::string> TrainArgs(const std::string& ckpt_dir) {
  return {"--model",
          "mlp",
          "--dataset",
          "synthetic",
          "--train-subset",
          "6000",
          "--val-subset",
          "300",
          "--epochs",
          "3",
          "--batch-size",
          "32",
          "--hidden",
          "64,32",
          "--dropout",
          "0.1",
          "--optimizer",
          "adam",
          "--lr",
          "0.001",
          "--seed",
          "3",
          "--threads",
          "2",
          "--checkpoint-dir",
          ckpt_dir,
          "--checkpoint-every",
          "50"};
}

// Waits until `dir` holds a checkpoint file at a step >= min_step, or the process ends.
bool WaitForCheckpoint(const std::string& dir, int64_t min_step, pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("ckpt-", 0) == 0 && name.size() > 9 &&
          name.substr(name.size() - 4) == ".bin" &&
          std::stoll(name.substr(5, name.size() - 9)) >= min_step) {
        return true;
      }
    }
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  return false;
}

std::string FinalPayload(const std::string& dir) {
  auto ckpt = LoadLatestCheckpoint(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  return ckpt.ok() ? ckpt->payload : "";
}

TEST(TrainCommandTest, SigkillMidRunThenResumeGivesBitIdenticalFinalState) {
  const std::string ref = TempDir("ref"), run = TempDir("run");
  ASSERT_EQ(RunToEnd(TrainArgs(ref + "/ckpt"), ref), 0) << ReadFile(ref + "/stderr");
  const std::string expected = FinalPayload(ref + "/ckpt");
  ASSERT_FALSE(expected.empty());

  pid_t pid = Start(TrainArgs(run + "/ckpt"), run);
  ASSERT_TRUE(WaitForCheckpoint(run + "/ckpt", 50, pid)) << "the trainer ended before step 50";
  kill(pid, SIGKILL);
  bool signaled = false;
  EXPECT_EQ(Wait(pid, &signaled), -SIGKILL);
  ASSERT_TRUE(signaled);

  ASSERT_EQ(RunToEnd(TrainArgs(run + "/ckpt"), run), 0) << ReadFile(run + "/stderr");
  EXPECT_THAT(ReadFile(run + "/stderr"), HasSubstr("resumed from the checkpoint at step"));
  EXPECT_TRUE(FinalPayload(run + "/ckpt") == expected) << "final state differs after resume";
  // The last epoch's line is printed with the same losses as the uninterrupted run.
  const std::string ref_out = ReadFile(ref + "/stdout"), run_out = ReadFile(run + "/stdout");
  const std::string last = ref_out.substr(ref_out.rfind("epoch=3"));
  EXPECT_THAT(run_out, HasSubstr(last.substr(0, last.find(" samples_per_sec"))));
}

TEST(TrainCommandTest, SigtermCheckpointsAndExitsPreemptedThenResumes) {
  const std::string ref = TempDir("ref"), run = TempDir("run");
  ASSERT_EQ(RunToEnd(TrainArgs(ref + "/ckpt"), ref), 0);
  pid_t pid = Start(TrainArgs(run + "/ckpt"), run);
  ASSERT_TRUE(WaitForCheckpoint(run + "/ckpt", 50, pid));
  kill(pid, SIGTERM);
  EXPECT_EQ(Wait(pid), kTrainExitPreempted) << ReadFile(run + "/stderr");
  EXPECT_THAT(ReadFile(run + "/stderr"), HasSubstr("preempted at step"));
  ASSERT_EQ(RunToEnd(TrainArgs(run + "/ckpt"), run), 0);
  EXPECT_TRUE(FinalPayload(run + "/ckpt") == FinalPayload(ref + "/ckpt"));
}

TEST(TrainCommandTest, PrintsOneMetricLinePerEpochWithTheFidelityName) {
  const std::string dir = TempDir("out");
  ASSERT_EQ(RunToEnd({"--dataset", "synthetic", "--train-subset", "500", "--val-subset", "100",
                      "--epochs", "2", "--batch-size", "50", "--hidden", "16", "--fidelity-name",
                      "step_epoch"},
                     dir),
            0);
  EXPECT_THAT(ReadFile(dir + "/stdout"),
              testing::MatchesRegex("step_epoch=1 train_loss=[0-9.]+ val_loss=[0-9.]+ "
                                    "val_accuracy=[0-9.]+ samples_per_sec=[0-9.]+\n"
                                    "step_epoch=2 .*\n"));
}

TEST(TrainCommandTest, BadArgumentsExitTwoNamingTheProblem) {
  const std::string dir = TempDir("bad");
  EXPECT_EQ(RunToEnd({"--dataset", "synthetic", "--batch-size", "0"}, dir), kTrainExitBadArgs);
  EXPECT_THAT(ReadFile(dir + "/stderr"), HasSubstr("batch_size: 0 is < 1"));
  EXPECT_EQ(RunToEnd({"--dataset", "synthetic", "--lr", "fast"}, dir), kTrainExitBadArgs);
  EXPECT_THAT(ReadFile(dir + "/stderr"), HasSubstr("--lr: 'fast' is not a number"));
  EXPECT_EQ(RunToEnd({"--learning-rate", "0.1"}, dir), kTrainExitBadArgs);
  EXPECT_THAT(ReadFile(dir + "/stderr"), HasSubstr("unknown option '--learning-rate'"));
  EXPECT_EQ(RunToEnd({"--dataset", "synthetic", "--hidden", "64,x"}, dir), kTrainExitBadArgs);
}

TEST(TrainCommandTest, HelpListsEveryFlagOnStdoutAndExitsZero) {
  for (const char* help : {"--help", "-h"}) {
    const std::string dir = TempDir(help[1] == '-' ? "long" : "short");
    EXPECT_EQ(RunToEnd({"--epochs", "3", help}, dir), kTrainExitOk);
    const std::string out = ReadFile(dir + "/stdout");
    EXPECT_THAT(out, HasSubstr("Usage: sextant-train"));
    for (const char* flag : {"--model",
                             "--dataset",
                             "--epochs",
                             "--batch-size",
                             "--hidden",
                             "--optimizer",
                             "--lr",
                             "--dropout",
                             "--weight-decay",
                             "--momentum",
                             "--seed",
                             "--threads",
                             "--gpus",
                             "--checkpoint-dir",
                             "--checkpoint-every",
                             "--memory-cap-mb",
                             "--fidelity-name",
                             "--nan-patience",
                             "--max-steps",
                             "--train-subset",
                             "--val-subset",
                             "--data-dir",
                             "--depth"}) {
      EXPECT_THAT(out, HasSubstr(std::string("\n  ") + flag + " ")) << help;
    }
    EXPECT_THAT(out, Not(HasSubstr("epoch=1")));  // it trained nothing
  }
}

TEST(TrainCommandTest, UnknownFlagIsRefusedNamingItWithExitTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--dataset", "synthetic", "--learning-rate", "0.1"},
                                             {"--learning-rate=0.1", "--dataset", "synthetic"}}) {
    const std::string dir = TempDir(args[0].substr(2, 4));
    EXPECT_EQ(RunToEnd(args, dir), kTrainExitBadArgs);
    const std::string err = ReadFile(dir + "/stderr");
    EXPECT_THAT(err, HasSubstr("sextant-train: unknown option '--learning-rate'\n"));
    EXPECT_THAT(err, HasSubstr("sextant-train --help"));
    EXPECT_EQ(ReadFile(dir + "/stdout"), "");
  }
  const std::string dir = TempDir("positional");
  EXPECT_EQ(RunToEnd({"--dataset", "synthetic", "extra"}, dir), kTrainExitBadArgs);
  EXPECT_THAT(ReadFile(dir + "/stderr"), HasSubstr("unknown option 'extra'"));
}

TEST(TrainCommandTest, BadNumericValueNamesTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--epochs", "ten"}, "--epochs: 'ten' is not an integer"},
      {{"--batch-size=1.5"}, "--batch-size: '1.5' is not an integer"},
      {{"--dropout", "half"}, "--dropout: 'half' is not a number"},
      {{"--memory-cap-mb", "-1"}, "--memory-cap-mb: '-1' is not a size >= 0"},
      {{"--threads", "0"}, "--threads: '0' is not a count >= 1"},
      {{"--depth", "65"}, "--depth: '65' is not a number of layers in 1..64"},
      {{"--seed", "1", "--seed"}, "--seed needs a value"},
  };
  for (const auto& [args, message] : cases) {
    const std::string dir = TempDir(args[0].substr(2, 5));
    std::vector<std::string> argv = {"--dataset", "synthetic"};
    argv.insert(argv.end(), args.begin(), args.end());
    EXPECT_EQ(RunToEnd(argv, dir), kTrainExitBadArgs) << message;
    EXPECT_THAT(ReadFile(dir + "/stderr"), HasSubstr("sextant-train: " + message));
  }
}

TEST(TrainCommandTest, RepeatedFlagTakesItsLastValueAndTheFirstBadOneIsReported) {
  const std::string dir = TempDir("last");
  ASSERT_EQ(RunToEnd({"--dataset", "synthetic", "--train-subset", "200", "--val-subset", "50",
                      "--epochs", "3", "--batch-size", "50", "--hidden", "8", "--epochs=1"},
                     dir),
            0)
      << ReadFile(dir + "/stderr");
  EXPECT_THAT(ReadFile(dir + "/stdout"), Not(HasSubstr("epoch=2")));
  const std::string bad = TempDir("bad");
  EXPECT_EQ(RunToEnd({"--lr", "fast", "--dataset", "synthetic", "--lr", "0.01"}, bad),
            kTrainExitBadArgs);
  EXPECT_THAT(ReadFile(bad + "/stderr"), HasSubstr("--lr: 'fast' is not a number"));
}

TEST(TrainCommandTest, GpusWithoutCudaDeviceFailsClearly) {
  if (!QueryGpus().empty()) GTEST_SKIP() << "a CUDA device is present";
  const std::string dir = TempDir("gpu");
  EXPECT_EQ(RunToEnd({"--dataset", "synthetic", "--gpus", "1"}, dir), kTrainExitFailed);
  EXPECT_THAT(ReadFile(dir + "/stderr"), HasSubstr("no CUDA device available: --gpus 1 requires"));
}

TEST(TrainCommandTest, MissingDatasetNamesThePackage) {
  const std::string dir = TempDir("data");
  EXPECT_EQ(RunToEnd({"--dataset", "fashion-mnist", "--data-dir", dir + "/absent"}, dir),
            kTrainExitFailed);
  EXPECT_THAT(ReadFile(dir + "/stderr"), HasSubstr("dataset-fashion-mnist"));
}

TEST(TrainCommandTest, UnwritableCheckpointDirectoryFailsNamingIt) {
  const std::string dir = TempDir("ro");
  std::ofstream(dir + "/file") << "x";
  EXPECT_EQ(RunToEnd({"--dataset", "synthetic", "--checkpoint-dir", dir + "/file/sub"}, dir),
            kTrainExitFailed);
  EXPECT_THAT(ReadFile(dir + "/stderr"), HasSubstr(dir + "/file/sub"));
}

TEST(TrainCommandTest, MemoryCapPrintsAnOomEvent) {
  const std::string dir = TempDir("oom");
  EXPECT_EQ(
      RunToEnd({"--dataset", "synthetic", "--train-subset", "256", "--val-subset", "64", "--epochs",
                "1", "--batch-size", "256", "--hidden", "1024,256", "--memory-cap-mb", "18"},
               dir),
      0)
      << ReadFile(dir + "/stderr");
  EXPECT_THAT(ReadFile(dir + "/stdout"),
              HasSubstr("sextant-event: oom micro_batch=128 reason=micro-batch_256_->_128"));
}

}  // namespace
}  // namespace sextant::train
