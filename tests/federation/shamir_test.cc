#include "federation/internal/shamir.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sextant::secagg_internal {
namespace {

TEST(ShamirTest, AnyThresholdSubsetReconstructsAndFewerDoNot) {
  Key32 seed{};
  seed[1] = 3;
  ChaChaDrbg rng(seed, 0);
  const Key32 secret = rng.NextKey();
  std::vector<uint32_t> xs = {1, 2, 5, 9, 10, 11, 40};
  auto shares = ShamirSplit(secret, 4, xs, rng);
  std::vector<std::pair<uint32_t, FieldShare>> subset = {
      {xs[6], shares[6]}, {xs[2], shares[2]}, {xs[0], shares[0]}, {xs[4], shares[4]}};
  auto back = ShamirReconstruct(subset, 4);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, secret);
  subset.pop_back();
  EXPECT_FALSE(ShamirReconstruct(subset, 4).ok());
  // Three shares plus a forged fourth do not give the secret (almost surely not even a valid one).
  subset.push_back({xs[5], shares[5]});
  subset.back().second[0] ^= 1;
  auto forged = ShamirReconstruct(subset, 4);
  EXPECT_TRUE(!forged.ok() || *forged != secret);
  subset.back().first = xs[6];  // repeated x
  EXPECT_FALSE(ShamirReconstruct(subset, 4).ok());
}

}  // namespace
}  // namespace sextant::secagg_internal
