#include "federation/secure_quantizer.h"

#include <algorithm>
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

// A client that puts a small weight and an out-of-range value inside its masked input (a
// weight the aggregator cannot see) is caught on the sum: no valid encoding gets there.
TEST(SecureQuantizerTest, ASumNoValidEncodingsMakeIsRefused) {
  SecureQuantizerOptions o;
  o.bits = 8;
  o.max_clients = 5;
  o.max_weight = 1000;
  auto q = SecureQuantizer::Create(o);
  ASSERT_TRUE(q.ok());
  const uint64_t ring = (uint64_t{1} << q->ring_bits()) - 1;
  std::vector<uint64_t> honest(3), sum(3);
  ASSERT_TRUE(q->Encode(std::vector<float>{0.5f, -0.5f}, 10, 1, absl::MakeSpan(honest)).ok());
  // The liar: weight 1, but its first value as large as weight 1000 at +clip would be.
  const std::vector<uint64_t> forged = {static_cast<uint64_t>(q->levels()) * 1000 & ring, 0, 1};
  for (int j = 0; j < 3; ++j) sum[j] = (honest[j] + forged[j]) & ring;
  std::vector<float> mean(2);
  absl::StatusOr<int64_t> total = q->DecodeMean(sum, absl::MakeSpan(mean));
  EXPECT_EQ(total.status().code(), absl::StatusCode::kInvalidArgument) << total.status();
  EXPECT_NE(total.status().message().find("not a sum of valid encodings"), std::string::npos);
  // The honest one alone decodes.
  total = q->DecodeMean(honest, absl::MakeSpan(mean));
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, 10);
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

// int8 secure aggregation quantises each tensor in its own range: a small tensor keeps a fine
// step however large another one's range is, and the decoded mean stays within one step of each
// segment's exact (clipped) weighted mean.
TEST(SecureQuantizerTest, EachSegmentHasItsOwnClipAndStep) {
  SecureQuantizerOptions o;
  o.bits = 8;  // L = 127
  o.max_clients = 3;
  o.max_weight = 10;
  o.segments = {2, 0, 3};
  o.segment_clips = {100.0, 5.0, 0.01};
  auto q = SecureQuantizer::Create(o);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_DOUBLE_EQ(q->max_error(), 100.0 / 127);
  const std::vector<std::vector<float>> x = {{50, -80, 0.004f, -0.002f, 0.5f},
                                             {-20, 10, 0.001f, 0.003f, -0.5f},
                                             {0, 200, -0.005f, 0.0f, 0.009f}};
  const std::vector<int64_t> w = {1, 3, 10};
  const uint64_t ring = (uint64_t{1} << q->ring_bits()) - 1;
  std::vector<uint64_t> sum(6, 0);
  for (int c = 0; c < 3; ++c) {
    std::vector<uint64_t> enc(6);
    ASSERT_TRUE(q->Encode(x[c], w[c], 7 + c, absl::MakeSpan(enc)).ok());
    for (int j = 0; j < 6; ++j) sum[j] = (sum[j] + enc[j]) & ring;
  }
  std::vector<float> mean(5);
  auto total = q->DecodeMean(sum, absl::MakeSpan(mean));
  ASSERT_TRUE(total.ok()) << total.status();
  EXPECT_EQ(*total, 14);
  const std::vector<double> clip = {100, 100, 0.01, 0.01, 0.01};
  for (int j = 0; j < 5; ++j) {
    double exact = 0;
    for (int c = 0; c < 3; ++c) {
      exact += w[c] * std::clamp(static_cast<double>(x[c][j]), -clip[j], clip[j]);
    }
    exact /= 14;
    EXPECT_NEAR(mean[j], exact, clip[j] / 127) << j;  // each segment's own step
  }
  // The segments must cover the update exactly.
  std::vector<uint64_t> enc(5);
  EXPECT_TRUE(absl::IsInvalidArgument(q->Encode({1, 2, 3, 4}, 1, 0, absl::MakeSpan(enc))));
  std::vector<float> short_mean(4);
  enc[4] = 1;  // a total weight, so that only the length is wrong
  EXPECT_TRUE(absl::IsInvalidArgument(q->DecodeMean(enc, absl::MakeSpan(short_mean)).status()));
  // Mismatched, negative or non-positive ranges are refused when the quantiser is made.
  o.segment_clips = {1.0, 1.0};
  EXPECT_TRUE(absl::IsInvalidArgument(SecureQuantizer::Create(o).status()));
  o.segment_clips = {1.0, 0.0, 1.0};
  EXPECT_TRUE(absl::IsInvalidArgument(SecureQuantizer::Create(o).status()));
  o.segment_clips = {1.0, std::nan(""), 1.0};
  EXPECT_TRUE(absl::IsInvalidArgument(SecureQuantizer::Create(o).status()));
  o.segment_clips = {1.0, 1.0, 1.0};
  o.segments = {2, -1, 4};
  EXPECT_TRUE(absl::IsInvalidArgument(SecureQuantizer::Create(o).status()));
}

TEST(SecureQuantizerTest, SegmentClipsFromMeanScaleEachTensorsLargestValue) {
  const std::vector<float> mean = {0.5f, -2.0f, 0.0f, 0.0f, 0.01f};
  EXPECT_EQ(SegmentClipsFromMean(mean, std::vector<int64_t>{2, 2, 1}, 4.0, 1e-6),
            (std::vector<double>{8.0, 1e-6, 4.0 * 0.01f}));
}

}  // namespace
}  // namespace sextant
