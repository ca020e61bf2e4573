#include "worker/telemetry.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern char** environ;

namespace sextant {
namespace {

// A shell busy-looping in its own process group, holding ~64 MiB in a variable; killed on exit.
class BusyGroup {
 public:
  BusyGroup() {
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    const char* argv[] = {"/bin/sh", "-c",
                          "head -c 67108864 /dev/zero | tr '\\0' x > /dev/null & "
                          "while :; do :; done",
                          nullptr};
    posix_spawn(&pid_, "/bin/sh", nullptr, &attr, const_cast<char**>(argv), environ);
    posix_spawnattr_destroy(&attr);
  }
  ~BusyGroup() {
    ::killpg(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
};

TEST(ProcessGroupSamplerTest, MeasuresCpuAndMemoryOfTheWholeGroup) {
  BusyGroup busy;
  ProcessGroupSampler sampler(busy.pid());
  ProcessSample first = sampler.Sample(absl::Now());
  EXPECT_EQ(first.cpu_percent, 0);  // no interval yet
  EXPECT_GE(first.processes, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  ProcessSample second = sampler.Sample(absl::Now());
  // One spinning shell: a full core when idle, much less on a shared, loaded machine (load 10 on
  // 2 cores leaves it ~20%), but never nothing.
  EXPECT_GT(second.cpu_percent, 5);
  EXPECT_LT(second.cpu_percent, 450);  // at most the processes it has
  EXPECT_GT(second.rss_bytes, 1 << 20);
}

TEST(ProcessGroupSamplerTest, AGoneGroupReportsNothing) {
  pid_t pid;
  {
    BusyGroup busy;
    pid = busy.pid();
  }
  // The group's other members were killed with it but are reaped by init, not by us: wait until
  // the kernel has no process left in the group.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (::killpg(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_NE(::killpg(pid, 0), 0) << "the group outlived its kill";
  ProcessGroupSampler sampler(pid);
  ProcessSample s = sampler.Sample(absl::Now());
  EXPECT_EQ(s.processes, 0);
  EXPECT_EQ(s.rss_bytes, 0);
}

TEST(ProcessGroupSamplerTest, AnExitedMemberNotYetReapedIsNotCounted) {
  // A sleeping leader of its own group, and a second member that exits at once and stays a
  // zombie until it is reaped below.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  const char* argv[] = {"/bin/sleep", "60", nullptr};
  pid_t leader = -1;
  ASSERT_EQ(posix_spawn(&leader, "/bin/sleep", nullptr, &attr, const_cast<char**>(argv), environ),
            0);
  posix_spawnattr_destroy(&attr);
  const pid_t member = ::fork();
  if (member == 0) {
    ::_exit(::setpgid(0, leader) == 0 ? 0 : 1);
  }
  ASSERT_GT(member, 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(member), &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(info.si_status, 0) << "the member did not join the group";
  ASSERT_EQ(::getpgid(member), leader);  // a zombie still belongs to its group
  ProcessGroupSampler sampler(leader);
  const ProcessSample s = sampler.Sample(absl::Now());
  ::waitpid(member, nullptr, 0);
  ::kill(leader, SIGKILL);
  ::waitpid(leader, nullptr, 0);
  EXPECT_EQ(s.processes, 1);
  EXPECT_GT(s.rss_bytes, 0);
}

TEST(GpuMonitorTest, OpensOrExplainsWhyNot) {
  auto monitor = GpuMonitor::Open();
  if (monitor.ok()) {
    EXPECT_GT((*monitor)->device_count(), 0);
    GpuSample s = (*monitor)->Sample({});
    EXPECT_EQ(s.count, (*monitor)->device_count());
    EXPECT_GT(s.memory_total_bytes, 0);
    EXPECT_EQ((*monitor)->Sample({999}).count, 0);  // an absent index is skipped
  } else {
    EXPECT_EQ(monitor.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(monitor.status().message(), ::testing::HasSubstr("NVML"));
  }
}

TEST(ParseDeviceListTest, AcceptsIndicesAndRejectsTheRest) {
  EXPECT_EQ(*ParseDeviceList("0,1,3"), (std::vector<int>{0, 1, 3}));
  EXPECT_TRUE(ParseDeviceList("")->empty());
  EXPECT_FALSE(ParseDeviceList("0,,1").ok());
  EXPECT_FALSE(ParseDeviceList("-1").ok());
  EXPECT_THAT(ParseDeviceList("gpu0").status().message(), ::testing::HasSubstr("'gpu0'"));
}

}  // namespace
}  // namespace sextant
