#include "orchestrator/search/local_workers.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

class LocalWorkersTest : public ::testing::Test {
 protected:
  // Reaps (replacing with `replace`) until no worker runs, for at most 20 s.
  void ReapAll(LocalWorkers& w, bool replace) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!w.empty() && std::chrono::steady_clock::now() < deadline) {
      w.Reap(replace);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  const std::filesystem::path dir_ = testing::MakeTempDir("local-workers");
  std::unique_ptr<ProcessLauncher> launcher_ = NewPosixProcessLauncher();
  std::ostringstream err_;
};

// Real processes: each worker runs its index's command line with its own log; a worker that
// exits is replaced, under its index, only while respawns are left.
TEST_F(LocalWorkersTest, ExitedWorkersAreReplacedUnderTheirIndexWhileRespawnsLast) {
  LocalWorkers w(
      launcher_.get(),
      [](int i) {
        return std::vector<std::string>{"/bin/sh", "-c", "echo worker " + std::to_string(i)};
      },
      dir_.string(), &err_);
  ASSERT_TRUE(w.Launch(0).ok());
  ASSERT_TRUE(w.Launch(1).ok());
  EXPECT_EQ(w.size(), 2);
  w.AllowRespawns(2);
  ReapAll(w, /*replace=*/true);
  EXPECT_TRUE(w.empty());
  const std::string zero = testing::ReadFile((dir_ / "worker-0.log").string());
  const std::string one = testing::ReadFile((dir_ / "worker-1.log").string());
  // Four starts in all: the two, and two replacements, each logging to its own index's file.
  size_t starts = 0;
  for (const std::string& log : {zero, one}) {
    for (size_t at = log.find("worker "); at != std::string::npos; at = log.find("worker ", at + 1))
      ++starts;
  }
  EXPECT_EQ(starts, 4u) << zero << one;
  EXPECT_EQ(zero.find("worker 1"), std::string::npos) << zero;
  EXPECT_EQ(one.find("worker 0"), std::string::npos) << one;
  EXPECT_TRUE(err_.str().empty()) << err_.str();
}

// Signal reaches every worker still running; reaped without replacement, none is left.
TEST_F(LocalWorkersTest, SignalStopsEveryWorkerAndNoneIsReplacedWithoutReplace) {
  LocalWorkers w(
      launcher_.get(),
      [](int) {
        return std::vector<std::string>{"/bin/sleep", "60"};
      },
      dir_.string(), &err_);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(w.Launch(i).ok());
  w.AllowRespawns(10);
  w.Reap(/*replace=*/true);
  EXPECT_EQ(w.size(), 3);  // all still running
  w.Signal(SIGKILL);
  ReapAll(w, /*replace=*/false);
  EXPECT_TRUE(w.empty());
}

// A replacement that cannot start is said on err and the run goes on with fewer workers.
TEST_F(LocalWorkersTest, AReplacementThatCannotStartIsSaid) {
  int launches = 0;
  LocalWorkers w(
      launcher_.get(),
      [&launches](int) {
        return std::vector<std::string>{++launches == 1 ? "/bin/true" : "/nonexistent/worker"};
      },
      dir_.string(), &err_);
  ASSERT_TRUE(w.Launch(0).ok());
  w.AllowRespawns(1);
  ReapAll(w, /*replace=*/true);
  EXPECT_TRUE(w.empty());
  EXPECT_NE(err_.str().find("sextant: "), std::string::npos) << err_.str();
}

}  // namespace
}  // namespace sextant
