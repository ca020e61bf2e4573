#include "strategies/internal/output_transform.h"

#include <Eigen/Core>
#include <cmath>

#include "gtest/gtest.h"

namespace sextant::internal {
namespace {

constexpr OutputWarp kAll[] = {OutputWarp::kNone, OutputWarp::kRankGaussian, OutputWarp::kLog,
                               OutputWarp::kBoxCox, OutputWarp::kTailLog};

TEST(OutputTransformTest, EveryWarpIsMonotoneAndStandardised) {
  Eigen::VectorXd y(7);
  y << 3.0, -1.0, 250.0, 0.5, 7.0, 1e5, 2.0;
  for (OutputWarp warp : kAll) {
    const Eigen::VectorXd t = WarpAndStandardize(y, warp);
    EXPECT_NEAR(t.mean(), 0, 1e-12) << static_cast<int>(warp);
    EXPECT_NEAR((t.array() - t.mean()).square().mean(), 1, 1e-9) << static_cast<int>(warp);
    for (int a = 0; a < y.size(); ++a) {
      for (int b = 0; b < y.size(); ++b) {
        if (y[a] < y[b]) {
          EXPECT_LT(t[a], t[b]) << static_cast<int>(warp);
        }
      }
    }
  }
}

TEST(OutputTransformTest, ConstantValuesBecomeZeros) {
  const Eigen::VectorXd y = Eigen::VectorXd::Constant(5, 42.0);
  for (OutputWarp warp : kAll) {
    EXPECT_TRUE(WarpAndStandardize(y, warp).isZero()) << static_cast<int>(warp);
  }
}

TEST(OutputTransformTest, TailLogKeepsTheBetterThreeQuartersAndCompressesOutliers) {
  Eigen::VectorXd y(8);
  y << 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 1e6;
  const Eigen::VectorXd t = WarpAndStandardize(y, OutputWarp::kTailLog);
  // Up to the upper quartile (6) the warp is linear: equal steps stay equal, above the
  // median (3.5) too.
  for (int i = 1; i <= 6; ++i) EXPECT_NEAR(t[i] - t[i - 1], t[1] - t[0], 1e-12) << i;
  // The outlier no longer squashes the rest into a sliver of the range (2e-6 of it unwarped).
  EXPECT_GT((t[2] - t[0]) / (t[7] - t[0]), 0.02);
}

}  // namespace
}  // namespace sextant::internal
