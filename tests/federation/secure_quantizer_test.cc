#include "federation/secure_quantizer.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(SecureQuantizerTest, RingTooSmallForClientsAndWeightsIsRefused) {
  SecureQuantizerOptions o;
  o.bits = 16;
  o.max_clients = 500;
  o.max_weight = 128;
  // 2 * 32767 * 500 * 128 = 4194176000 < 2^32.
  EXPECT_EQ(SecureQuantizer::RequiredRingBits(16, 500, 128), 32);
  o.ring_bits = 31;
  EXPECT_EQ(SecureQuantizer::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.ring_bits = 32;
  EXPECT_TRUE(SecureQuantizer::Create(o).ok());
  o.ring_bits = 0;
  o.max_weight = 132;  // 2 * 32767 * 500 * 132 > 2^32
  auto q = SecureQuantizer::Create(o);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->ring_bits(), 33);
  o.bits = 32;
  o.max_clients = int64_t{1} << 20;
  o.max_weight = int64_t{1} << 20;
  EXPECT_FALSE(SecureQuantizer::Create(o).ok());  // would need more than 64 bits
  o = SecureQuantizerOptions{};
  o.max_clients = 10;
  o.clip = 0;
  EXPECT_FALSE(SecureQuantizer::Create(o).ok());
}

TEST(SecureQuantizerTest, WorstCaseSumDecodesWithoutOverflow) {
  // Every client at +clip (or -clip) with the largest weight: the extreme sums still decode.
  SecureQuantizerOptions o;
  o.bits = 8;
  o.max_clients = 5;
  o.max_weight = 7;
  auto q = SecureQuantizer::Create(o);
  ASSERT_TRUE(q.ok());
  for (float sign : {1.0f, -1.0f}) {
    std::vector<uint64_t> sum(3, 0);
    const uint64_t ring = (uint64_t{1} << q->ring_bits()) - 1;
    for (int i = 0; i < 5; ++i) {
      std::vector<uint64_t> enc(3);
      std::vector<float> x = {sign * 5.0f, sign * 1.0f};
      ASSERT_TRUE(q->Encode(x, 7, i, absl::MakeSpan(enc)).ok());
      for (int j = 0; j < 3; ++j) sum[j] = (sum[j] + enc[j]) & ring;
    }
    std::vector<float> mean(2);
    auto total = q->DecodeMean(sum, absl::MakeSpan(mean));
    ASSERT_TRUE(total.ok());
    EXPECT_EQ(*total, 35);
    EXPECT_FLOAT_EQ(mean[0], sign);
    EXPECT_FLOAT_EQ(mean[1], sign);
  }
}

TEST(SecureQuantizerTest, StochasticRoundingIsUnbiased) {
  SecureQuantizerOptions o;
  o.bits = 4;  // L = 7: coarse levels make a bias visible
  o.max_clients = 1;
  auto q = SecureQuantizer::Create(o);
  ASSERT_TRUE(q.ok());
  const float x = 0.3f;  // 2.1 levels
  std::vector<float> xs(20000, x);
  std::vector<uint64_t> enc(xs.size() + 1);
  ASSERT_TRUE(q->Encode(xs, 1, 42, absl::MakeSpan(enc)).ok());
  double mean = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    ASSERT_TRUE(enc[i] == 2 || enc[i] == 3);
    mean += static_cast<double>(enc[i]) / 7.0;
  }
  mean /= xs.size();
  EXPECT_NEAR(mean, x, 0.005);  // 3.5 standard errors
}

TEST(SecureQuantizerTest, BadInputsAreRefused) {
  SecureQuantizerOptions o;
  o.max_clients = 3;
  o.max_weight = 2;
  auto q = SecureQuantizer::Create(o);
  ASSERT_TRUE(q.ok());
  std::vector<uint64_t> out(3);
  std::vector<float> x = {0.1f, NAN};
  EXPECT_FALSE(q->Encode(x, 1, 0, absl::MakeSpan(out)).ok());
  x[1] = 0;
  EXPECT_FALSE(q->Encode(x, 3, 0, absl::MakeSpan(out)).ok());
  EXPECT_FALSE(q->Encode(x, 1, 0, absl::MakeSpan(out).subspan(1)).ok());
  std::vector<float> mean(2);
  std::vector<uint64_t> zero(3, 0);
  EXPECT_EQ(q->DecodeMean(zero, absl::MakeSpan(mean)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sextant
