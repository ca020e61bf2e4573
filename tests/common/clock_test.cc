#include "common/clock.h"

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(FakeClockTest, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  absl::Time t0 = clock.Now();
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(absl::Seconds(3));
  EXPECT_EQ(clock.Now() - t0, absl::Seconds(3));
}

}  // namespace
}  // namespace sextant
