#include "orchestrator/simulate/run_timing.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "orchestrator/core/rounds_table.h"

namespace sextant {
namespace {

RoundRow Global(int64_t round, double time) {
  RoundRow r;
  r.round = round;
  r.time = time;
  return r;
}

RoundRow Region(int64_t round, double time) {
  RoundRow r = Global(round, time);
  r.region = "east";
  return r;
}

TEST(RunTimingTest, RoundsAreTheMedianGapBetweenConsecutiveClosesAndStartUpTheRest) {
  // Closes at 4, 5, 7, 8 and (after a failed round 5) 11: gaps 1, 2, 1; 4 to 6 spans a
  // missing round and does not count. Region rows are not rounds of their own.
  absl::StatusOr<RunTiming> t = MeasureRunTiming(
      {Global(1, 4), Region(1, 100), Global(2, 5), Global(3, 7), Global(4, 8), Global(6, 11)});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->round_seconds, 1);
  EXPECT_DOUBLE_EQ(t->startup_seconds, 3);
  EXPECT_EQ(t->gaps, 3);
  // An even count takes the middle two's mean; a first round quicker than the median starts
  // at 0.
  t = MeasureRunTiming({Global(1, 0.5), Global(2, 1.5), Global(3, 4.5)});
  ASSERT_TRUE(t.ok());
  EXPECT_DOUBLE_EQ(t->round_seconds, 2);
  EXPECT_DOUBLE_EQ(t->startup_seconds, 0);
}

TEST(RunTimingTest, ARunWithoutTwoRoundsInARowCannotTimeAForecast) {
  absl::StatusOr<RunTiming> t = MeasureRunTiming({Global(1, 4), Global(3, 9), Region(2, 6)});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("no two in a row"), std::string::npos) << t.status();
}

TEST(RunTimingTest, ReadsTheRoundsARunStoredAndNamesAFolderWithoutOne) {
  const std::string dir = ::testing::TempDir() + "/run-timing-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    absl::StatusOr<RoundsTable> table = RoundsTable::Open(dir + "/state.db");
    ASSERT_TRUE(table.ok()) << table.status();
    ASSERT_TRUE(table->Put({Global(1, 2.5), Global(2, 3.0), Global(3, 3.5), Region(3, 3.5)}).ok());
  }
  absl::StatusOr<RunTiming> t = MeasureRunTiming(dir);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_DOUBLE_EQ(t->round_seconds, 0.5);
  EXPECT_DOUBLE_EQ(t->startup_seconds, 2);

  const std::string empty = dir + "/nothing";
  std::filesystem::create_directories(empty);
  t = MeasureRunTiming(empty);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find(empty), std::string::npos) << t.status();
}

}  // namespace
}  // namespace sextant
