// The live report that --metrics-port serves at `/`: the run directory's report, made at most
// once per max_age, updating itself only while the run goes on.
#include "orchestrator/monitor/live_report.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/run_dir.h"
#include "tests/orchestrator/report/report_test_support.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// The live page updates by fetching itself every 3 s (never by a meta refresh, which would
// reload into "connection refused" once the run's server has gone).
constexpr char kRefresh[] = "setTimeout(poll,every)";
constexpr char kEvery[] = "var every=3000,";

std::string SmallRun(const std::string& name) {
  const std::string dir = testing::MakeTempDir(name) + "/run";
  testing::SyntheticRunOptions o;
  o.trials = 12;
  o.epochs = 3;
  o.state = v1::RUN_RUNNING;
  testing::BuildSyntheticRun(dir, o);
  return dir;
}

TEST(LiveReportTest, UpdatesOnlyWhileTheRunIsLiveAndStopsOnceItHasEnded) {
  const std::string dir = SmallRun("live-report");
  FakeClock clock;
  LiveReportOptions o;
  o.refresh_seconds = 3;
  LiveReport live(dir, &clock, o);
  // No process holds the run: it stopped, so the page does not update.
  absl::StatusOr<std::string> page = live.Page();
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, Not(HasSubstr(kRefresh)));
  EXPECT_THAT(*page, Not(HasSubstr("connect-src")));
  EXPECT_THAT(*page, HasSubstr("id=\"run-stopped\""));

  absl::StatusOr<RunDir> held = RunDir::Acquire(dir);  // the run's process, as it runs
  ASSERT_TRUE(held.ok()) << held.status();
  clock.Advance(absl::Seconds(3));
  page = live.Page();
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr(kRefresh));
  EXPECT_THAT(*page, HasSubstr(kEvery));
  EXPECT_THAT(*page, Not(HasSubstr("http-equiv=\"refresh\"")));
  EXPECT_THAT(*page, HasSubstr("connect-src 'self'"));
  EXPECT_THAT(*page, HasSubstr("id=\"run-in-progress\""));
  EXPECT_THAT(*page, HasSubstr("this page updates every 3 s and says when the run has ended"));

  live.RunEnded();  // its final state is stored; the process still holds the directory
  page = live.Page();
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, Not(HasSubstr(kRefresh)));
  EXPECT_THAT(*page, Not(HasSubstr("id=\"run-in-progress\"")));
}

TEST(LiveReportTest, APageIsMadeAtMostOncePerMaxAge) {
  const std::string dir = SmallRun("live-report-cache");
  FakeClock clock;
  LiveReportOptions o;
  o.max_age = absl::Seconds(2);
  LiveReport live(dir, &clock, o);
  absl::StatusOr<std::string> first = live.Page();
  ASSERT_TRUE(first.ok()) << first.status();
  // The run directory goes away: within max_age the page is not made again.
  std::filesystem::rename(dir, dir + "-moved");
  clock.Advance(absl::Milliseconds(1900));
  absl::StatusOr<std::string> cached = live.Page();
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(*cached, *first);
  clock.Advance(absl::Milliseconds(200));
  EXPECT_EQ(live.Page().status().code(), absl::StatusCode::kNotFound);
  std::filesystem::rename(dir + "-moved", dir);
  absl::StatusOr<std::string> again = live.Page();  // an error is not cached
  ASSERT_TRUE(again.ok()) << again.status();
}

TEST(LiveReportTest, ADirectoryWithoutARunIsNotFound) {
  FakeClock clock;
  LiveReport live(testing::MakeTempDir("live-report-empty"), &clock);
  EXPECT_EQ(live.Page().status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sextant
