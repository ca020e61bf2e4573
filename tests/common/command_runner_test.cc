#include "common/command_runner.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

using Metrics = std::map<std::string, double>;

class RecordingObserver : public CommandObserver {
 public:
  void OnMetrics(const Metrics& metrics, double elapsed_seconds) override {
    metrics_.push_back(metrics);
    elapsed_.push_back(elapsed_seconds);
    if (on_metrics) on_metrics(metrics);
  }
  bool OnTick() override {
    ++ticks_;
    return on_tick ? on_tick() : true;
  }

  void OnEvent(const std::string& kind, const std::string& message, double) override {
    events.push_back(kind + "|" + message);
  }
  double StopGraceSeconds() const override { return grace; }

  std::vector<std::string> events;
  double grace = -1;
  std::function<void(const Metrics&)> on_metrics;
  std::function<bool()> on_tick;
  const std::vector<Metrics>& metrics() const { return metrics_; }
  const std::vector<double>& elapsed() const { return elapsed_; }
  int ticks() const { return ticks_; }

 private:
  std::vector<Metrics> metrics_;
  std::vector<double> elapsed_;
  int ticks_ = 0;
};

CommandSpec Shell(const std::string& script) {
  CommandSpec spec;
  spec.argv = {"/bin/sh", "-c", script};
  spec.tick_seconds = 0.02;
  return spec;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// True once pid no longer runs: gone, or a zombie waiting for init to reap it.
bool ProcessGone(pid_t pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren == std::string::npos || (paren + 2 < stat.size() && stat[paren + 2] == 'Z');
}

bool EventuallyGone(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (ProcessGone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

int64_t MaxRssKib() {
  rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

class CommandRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/command_runner_test.XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  CommandResult Run(const CommandSpec& spec, Clock* clock = RealClockInstance()) {
    absl::StatusOr<CommandResult> result = RunCommand(spec, &observer_, clock);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : CommandResult{};
  }

  std::filesystem::path dir_;
  RecordingObserver observer_;
};

TEST_F(CommandRunnerTest, StreamsMetricsInOrderWithElapsedTime) {
  CommandResult result = Run(Shell(
      "echo step=1 loss=0.5; echo just prose; sleep 0.05; echo step=2 loss=0.25; printf step=3"));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.error, "");
  EXPECT_THAT(observer_.metrics(), ElementsAre(ElementsAre(Pair("loss", 0.5), Pair("step", 1.0)),
                                               ElementsAre(Pair("loss", 0.25), Pair("step", 2.0)),
                                               ElementsAre(Pair("step", 3.0))));
  ASSERT_EQ(observer_.elapsed().size(), 3u);
  EXPECT_GE(observer_.elapsed()[0], 0.0);
  EXPECT_GE(observer_.elapsed()[1], observer_.elapsed()[0] + 0.04);
  EXPECT_GE(observer_.elapsed()[2], observer_.elapsed()[1]);
}

TEST_F(CommandRunnerTest, CapturesStdoutAndStderrToFiles) {
  CommandSpec spec = Shell("echo out1; echo err1 >&2; echo loss=1; printf tail >&2");
  spec.stdout_path = dir_ / "stdout.txt";
  spec.stderr_path = dir_ / "stderr.txt";
  std::ofstream(spec.stdout_path) << "stale contents that must be truncated\n";
  CommandResult result = Run(spec);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(ReadFile(spec.stdout_path), "out1\nloss=1\n");
  EXPECT_EQ(ReadFile(spec.stderr_path), "err1\ntail");
  EXPECT_EQ(result.stderr_tail, "err1\ntail");
}

TEST_F(CommandRunnerTest, ReportsNonZeroExitAndStderrTail) {
  CommandSpec spec = Shell("printf 'aaaaaaaaaaaaaaaaaaaa0123456789' >&2; exit 3");
  spec.stderr_tail_bytes = 8;
  CommandResult result = Run(spec);
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.error, "exited with status 3");
  EXPECT_EQ(result.stderr_tail, "23456789");
  EXPECT_FALSE(result.spawn_failed);
}

TEST_F(CommandRunnerTest, ReportsDeathBySignal) {
  CommandResult result = Run(Shell("kill -KILL $$"));
  EXPECT_EQ(result.exit_code, -SIGKILL);
  EXPECT_EQ(result.error, "killed by signal SIGKILL");
}

TEST_F(CommandRunnerTest, CommandNotFoundIsASpawnFailure) {
  CommandSpec spec;
  spec.argv = {"sextant-no-such-command-xyz", "arg"};
  CommandResult result = Run(spec);
  EXPECT_TRUE(result.spawn_failed);
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_EQ(result.error, "command not found: sextant-no-such-command-xyz");
}

TEST_F(CommandRunnerTest, NonExecutableFileIsASpawnFailure) {
  std::filesystem::path script = dir_ / "not_executable.sh";
  std::ofstream(script) << "#!/bin/sh\necho loss=1\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_read);
  CommandSpec spec;
  spec.argv = {script.string()};
  CommandResult result = Run(spec);
  EXPECT_TRUE(result.spawn_failed);
  EXPECT_EQ(result.exit_code, 127);
  EXPECT_THAT(result.error, HasSubstr(script.string()));
  EXPECT_TRUE(observer_.metrics().empty());
}

TEST_F(CommandRunnerTest, MissingWorkingDirIsASpawnFailure) {
  CommandSpec spec = Shell("echo loss=1");
  spec.working_dir = dir_ / "missing";
  CommandResult result = Run(spec);
  EXPECT_TRUE(result.spawn_failed);
  EXPECT_THAT(result.error, HasSubstr("missing"));
}

TEST_F(CommandRunnerTest, UnopenableCaptureFileIsAnError) {
  CommandSpec spec = Shell("echo loss=1");
  spec.stdout_path = dir_ / "no" / "such" / "dir" / "stdout.txt";
  absl::StatusOr<CommandResult> result = RunCommand(spec, &observer_, RealClockInstance());
  EXPECT_FALSE(result.ok());
  EXPECT_THAT(std::string(result.status().message()), HasSubstr("stdout.txt"));
}

TEST_F(CommandRunnerTest, CaptureFileThatIsALinkIsRefusedAndItsTargetKept) {
  const std::filesystem::path target = dir_ / "target.txt";
  std::ofstream(target) << "kept\n";
  CommandSpec spec = Shell("echo loss=1");
  spec.stderr_path = dir_ / "stderr.txt";
  std::filesystem::create_symlink(target, spec.stderr_path);
  absl::StatusOr<CommandResult> result = RunCommand(spec, &observer_, RealClockInstance());
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(result.status()));
  EXPECT_THAT(std::string(result.status().message()),
              HasSubstr("stderr.txt is a symbolic link; refusing to write through it"));
  EXPECT_EQ(ReadFile(target), "kept\n");
}

TEST_F(CommandRunnerTest, CaptureFilesMaskSecretsEvenSplitAcrossWrites) {
  // The secret reaches the pipe in two writes, a moment apart, so that it arrives in two reads.
  CommandSpec spec = Shell(
      "printf 'a=1 tok-12'; sleep 0.2; printf '34-end b=2\\n'; "
      "printf 'tok-1234-end\\n' >&2; printf 'ends with tok-12'");
  spec.stdout_path = dir_ / "stdout.txt";
  spec.stderr_path = dir_ / "stderr.txt";
  spec.redact = Redactor(std::map<std::string, std::string>{{"API_TOKEN", "tok-1234-end"}});
  CommandResult result = Run(spec);
  EXPECT_EQ(result.exit_code, 0);
  // The unfinished start of a secret at the very end is written as it is.
  EXPECT_EQ(ReadFile(spec.stdout_path), "a=1 [REDACTED] b=2\nends with tok-12");
  EXPECT_EQ(ReadFile(spec.stderr_path), "[REDACTED]\n");
  // The observer still parses the metrics of the whole line.
  EXPECT_THAT(observer_.metrics(), ElementsAre(ElementsAre(Pair("a", 1), Pair("b", 2))));
}

TEST_F(CommandRunnerTest, TimeoutKillsTheWholeProcessGroup) {
  FakeClock clock;
  std::atomic<pid_t> grandchild{0};
  observer_.on_metrics = [&](const Metrics& m) {
    if (m.contains("child")) grandchild = static_cast<pid_t>(m.at("child"));
  };
  std::thread advancer([&] {
    for (int i = 0; i < 500 && grandchild == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    clock.Advance(absl::Seconds(11));
  });
  CommandSpec spec = Shell("sleep 30 & echo child=$!; sleep 30");
  spec.timeout_seconds = 10;
  auto started = std::chrono::steady_clock::now();
  CommandResult result = Run(spec, &clock);
  advancer.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.exit_code, -SIGKILL);
  EXPECT_EQ(result.error, "timed out after 10s");
  ASSERT_GT(grandchild.load(), 0);
  EXPECT_TRUE(EventuallyGone(grandchild));
}

TEST_F(CommandRunnerTest, StopRequestSendsSigtermToTheGroup) {
  bool ready = false;
  observer_.on_metrics = [&](const Metrics& m) { ready = ready || m.contains("ready"); };
  observer_.on_tick = [&] { return !ready; };
  CommandResult result =
      Run(Shell("trap 'echo term=1; exit 0' TERM; echo ready=1; while :; do sleep 0.05; done"));
  EXPECT_TRUE(result.stopped);
  EXPECT_FALSE(result.timed_out);
  EXPECT_EQ(result.error, "stopped on request");
  EXPECT_THAT(observer_.metrics(),
              ElementsAre(ElementsAre(Pair("ready", 1.0)), ElementsAre(Pair("term", 1.0))));
}

TEST_F(CommandRunnerTest, StopEscalatesToSigkillAfterGrace) {
  bool ready = false;
  observer_.on_metrics = [&](const Metrics& m) { ready = ready || m.contains("ready"); };
  observer_.on_tick = [&] { return !ready; };
  CommandSpec spec = Shell("trap '' TERM; echo ready=1; while :; do sleep 0.05; done");
  spec.kill_grace_seconds = 0.1;
  auto started = std::chrono::steady_clock::now();
  CommandResult result = Run(spec);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(2));
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.exit_code, -SIGKILL);
}

TEST_F(CommandRunnerTest, TicksWhileTheCommandIsSilent) {
  CommandResult result = Run(Shell("sleep 0.3"));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_GE(observer_.ticks(), 5);
}

TEST_F(CommandRunnerTest, HugeLineIsCutWithBoundedMemory) {
  CommandSpec spec = Shell("head -c 3145728 /dev/zero | tr '\\0' a; printf '\\nloss=1\\n'");
  spec.max_line_bytes = 64 * 1024;
  spec.stdout_path = dir_ / "stdout.txt";
  int64_t rss_before = MaxRssKib();
  CommandResult result = Run(spec);
  EXPECT_LT(MaxRssKib() - rss_before, 2048);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.long_lines, 1);
  EXPECT_THAT(observer_.metrics(), ElementsAre(ElementsAre(Pair("loss", 1.0))));
  EXPECT_EQ(std::filesystem::file_size(spec.stdout_path), 3145728u + 8u);
}

TEST_F(CommandRunnerTest, BinaryGarbageIsHarmless) {
  CommandResult result =
      Run(Shell("head -c 200000 /dev/urandom; printf '\\000\\377\\001=\\n\\nloss=2\\n'"));
  EXPECT_EQ(result.exit_code, 0);
  ASSERT_FALSE(observer_.metrics().empty());
  EXPECT_THAT(observer_.metrics().back(), ElementsAre(Pair("loss", 2.0)));
}

TEST_F(CommandRunnerTest, EnvAndWorkingDirReachTheChild) {
  CommandSpec spec = Shell(
      "echo v=$SEXTANT_TEST_VALUE; test \"$HOME\" = /nowhere && echo home=1; echo x > marker");
  spec.env = {{"SEXTANT_TEST_VALUE", "42.5"}, {"HOME", "/nowhere"}};
  spec.working_dir = dir_;
  CommandResult result = Run(spec);
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(observer_.metrics(),
              ElementsAre(ElementsAre(Pair("v", 42.5)), ElementsAre(Pair("home", 1.0))));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "marker"));
}

TEST_F(CommandRunnerTest, NanMetricIsReportedAsNan) {
  Run(Shell("echo loss=nan"));
  ASSERT_EQ(observer_.metrics().size(), 1u);
  EXPECT_TRUE(std::isnan(observer_.metrics()[0].at("loss")));
}

TEST_F(CommandRunnerTest, DescendantsHoldingThePipesAreKilledAfterExit) {
  std::atomic<pid_t> grandchild{0};
  observer_.on_metrics = [&](const Metrics& m) {
    if (m.contains("child")) grandchild = static_cast<pid_t>(m.at("child"));
  };
  auto started = std::chrono::steady_clock::now();
  CommandResult result = Run(Shell("sleep 30 & echo child=$!; exit 0"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(3));
  EXPECT_EQ(result.exit_code, 0);
  ASSERT_GT(grandchild.load(), 0);
  EXPECT_TRUE(EventuallyGone(grandchild));
}

TEST_F(CommandRunnerTest, ChildGetsDefaultSignalsAndAnEmptyMask) {
  struct sigaction ignore = {}, saved = {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &saved);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  ::pthread_sigmask(SIG_BLOCK, &block, &old_mask);
  // grep replaces the shell (exec) and reads its own status: what the command inherited. Read
  // from the shell while it forks grep, the mask showed the shell's own blocking around fork.
  CommandSpec spec = Shell("exec grep -E '^Sig(Ign|Blk)' /proc/self/status");
  spec.stdout_path = dir_ / "status.txt";
  CommandResult result = Run(spec);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGPIPE, &saved, nullptr);

  EXPECT_EQ(result.exit_code, 0);
  std::map<std::string, uint64_t> masks;
  std::istringstream lines(ReadFile(spec.stdout_path));
  std::string name, hex;
  while (lines >> name >> hex) masks[name] = std::stoull(hex, nullptr, 16);
  ASSERT_EQ(masks.size(), 2u);
  EXPECT_EQ(masks["SigIgn:"] & (1ull << (SIGPIPE - 1)), 0u);
  EXPECT_EQ(masks["SigBlk:"], 0u);
}

TEST_F(CommandRunnerTest, EventLinesReachOnEventAndAreNotMetrics) {
  CommandResult result =
      Run(Shell("echo 'sextant-event: oom micro_batch=64 reason=cap'; echo loss=1; "
                "echo 'sextant-event: Bad kind=1'; echo 'sextant-event:'"));
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_THAT(observer_.events, ElementsAre("oom|micro_batch=64 reason=cap"));
  // A malformed event line is treated as an ordinary line (its name=value tokens count).
  EXPECT_THAT(observer_.metrics(),
              ElementsAre(ElementsAre(Pair("loss", 1.0)), ElementsAre(Pair("kind", 1.0))));
}

TEST_F(CommandRunnerTest, ObserverGraceLetsACommandFinishItsCheckpointAfterSigterm) {
  // The command needs 0.6 s after SIGTERM to "checkpoint"; the spec's grace alone would kill it.
  CommandSpec spec = Shell(
      "trap 'sleep 0.6; echo saved=1; exit 75' TERM; echo started=1; "
      "while true; do sleep 0.05; done");
  spec.kill_grace_seconds = 0.1;
  observer_.grace = 3;
  observer_.on_tick = [this] { return observer_.metrics().empty(); };
  CommandResult result = Run(spec);
  EXPECT_TRUE(result.stopped);
  EXPECT_EQ(result.exit_code, 75);
  EXPECT_THAT(observer_.metrics(),
              ElementsAre(ElementsAre(Pair("started", 1.0)), ElementsAre(Pair("saved", 1.0))));
}

}  // namespace
}  // namespace sextant
