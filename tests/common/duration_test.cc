#include "common/duration.h"

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(DurationTest, ParsesUnitsAndBareSeconds) {
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("90"), 90);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("10m"), 600);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("2h"), 7200);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("1h30m"), 5400);
  EXPECT_DOUBLE_EQ(*ParseDurationSeconds("250ms"), 0.25);
}

TEST(DurationTest, RejectsGarbageAndNegatives) {
  EXPECT_FALSE(ParseDurationSeconds("ten minutes").ok());
  EXPECT_FALSE(ParseDurationSeconds("-5").ok());
  EXPECT_FALSE(ParseDurationSeconds("-5m").ok());
  EXPECT_FALSE(ParseDurationSeconds("").ok());
}

TEST(DurationTest, FormatsClock) {
  EXPECT_EQ(FormatClock(42), "0:42");
  EXPECT_EQ(FormatClock(725), "12:05");
  EXPECT_EQ(FormatClock(3 * 3600 + 2 * 60 + 11), "3:02:11");
  EXPECT_EQ(FormatClock(-1), "--:--");
}

}  // namespace
}  // namespace sextant
