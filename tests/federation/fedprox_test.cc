#include "federation/fedprox.h"

#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(FedProxTest, AddsMuTimesDistanceToGlobalToTheGradient) {
  std::vector<float> grad = {1, -1, 0.5f};
  const std::vector<float> w = {2, 0, -1}, global = {1, 1, 1};
  ASSERT_TRUE(AddProximalGradient(absl::MakeSpan(grad), w, global, 0.5).ok());
  EXPECT_EQ(grad, (std::vector<float>{1 + 0.5f * 1, -1 + 0.5f * -1, 0.5f + 0.5f * -2}));
}

TEST(FedProxTest, LossIsHalfMuSquaredDistance) {
  const std::vector<float> w = {2, 0, -1}, global = {1, 1, 1};
  absl::StatusOr<double> loss = ProximalLoss(w, global, 0.5);
  ASSERT_TRUE(loss.ok());
  EXPECT_DOUBLE_EQ(*loss, 0.25 * (1 + 1 + 4));
}

TEST(FedProxTest, ZeroMuIsPlainFedAvg) {
  std::vector<float> grad = {3, 4};
  const std::vector<float> w = {10, 10}, global = {0, 0};
  ASSERT_TRUE(AddProximalGradient(absl::MakeSpan(grad), w, global, 0.0).ok());
  EXPECT_EQ(grad, (std::vector<float>{3, 4}));
  EXPECT_EQ(*ProximalLoss(w, global, 0.0), 0.0);
}

TEST(FedProxTest, RejectsMismatchedShapesAndNegativeMu) {
  std::vector<float> grad = {1, 2};
  const std::vector<float> w = {1, 2}, global = {1, 2, 3};
  EXPECT_EQ(AddProximalGradient(absl::MakeSpan(grad), w, global, 0.1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddProximalGradient(absl::MakeSpan(grad), w, w, -0.1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(grad, (std::vector<float>{1, 2}));
  EXPECT_EQ(ProximalLoss(w, global, 0.1).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant
