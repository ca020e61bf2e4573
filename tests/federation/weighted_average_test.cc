#include "federation/weighted_average.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(WeightedAverageTest, EqualsExactWeightedMean) {
  WeightedAverage avg(3);
  std::vector<float> a = {1, 2, 3}, b = {4, 5, 6};
  ASSERT_TRUE(avg.Add(a, 1.0).ok());
  ASSERT_TRUE(avg.Add(b, 3.0).ok());
  std::vector<float> out(3);
  ASSERT_TRUE(avg.Mean(absl::MakeSpan(out)).ok());
  EXPECT_FLOAT_EQ(out[0], (1 * 1 + 4 * 3) / 4.0f);
  EXPECT_FLOAT_EQ(out[1], (2 * 1 + 5 * 3) / 4.0f);
  EXPECT_FLOAT_EQ(out[2], (3 * 1 + 6 * 3) / 4.0f);
  EXPECT_EQ(avg.count(), 2);
}

TEST(WeightedAverageTest, RejectsBadUpdatesWithoutChangingTheSum) {
  WeightedAverage avg(2);
  std::vector<float> good = {2, 2};
  ASSERT_TRUE(avg.Add(good, 1.0).ok());
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 1};
  std::vector<float> wrong = {1, 2, 3};
  EXPECT_EQ(avg.Add(nan, 1.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(avg.Add(wrong, 1.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(avg.Add(good, 0.0).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> out(2);
  ASSERT_TRUE(avg.Mean(absl::MakeSpan(out)).ok());
  EXPECT_FLOAT_EQ(out[0], 2);
  EXPECT_EQ(avg.count(), 1);
}

TEST(WeightedAverageTest, MeanOfNothingIsAnError) {
  WeightedAverage avg(2);
  std::vector<float> out(2);
  EXPECT_EQ(avg.Mean(absl::MakeSpan(out)).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sextant
