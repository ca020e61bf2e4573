#include "federation/update_codec.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

std::vector<float> Gaussian(size_t n, float sigma, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(UpdateCodecTest, NamesRoundTripAndOthersAreRefused) {
  for (UpdateCompression m :
       {UpdateCompression::kNone, UpdateCompression::kF16, UpdateCompression::kInt8}) {
    EXPECT_EQ(ParseUpdateCompression(UpdateCompressionName(m)), m);
  }
  EXPECT_EQ(ParseUpdateCompression("int4"), std::nullopt);
  EXPECT_EQ(ParseUpdateCompression("FP16"), std::nullopt);
}

TEST(UpdateCodecTest, Fp16RoundTripIsWithinHalfAnUlpOfBinary16) {
  const std::vector<float> x = Gaussian(4096, 0.01f, 1);
  const std::vector<int64_t> segments = {4000, 96};
  absl::StatusOr<EncodedUpdate> e = EncodeUpdate(x, segments, UpdateCompression::kF16, 7);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->payload.size(), x.size() * 2);
  EXPECT_TRUE(e->scales.empty());
  absl::StatusOr<std::vector<float>> d = DecodeUpdate(*e);
  ASSERT_TRUE(d.ok()) << d.status();
  for (size_t i = 0; i < x.size(); ++i) {
    // 11 significant bits: relative error 2^-11 for normals, 2^-25 absolute below 2^-14.
    EXPECT_LE(std::fabs((*d)[i] - x[i]), std::max(std::fabs(x[i]) * 0x1p-11f, 0x1p-25f)) << i;
  }
}

TEST(UpdateCodecTest, Int8ErrorIsAtMostOneStepOfItsTensorsScale) {
  std::vector<float> x = Gaussian(3000, 0.05f, 2);
  for (size_t i = 2000; i < 3000; ++i) x[i] *= 100;  // a second tensor on another scale
  const std::vector<int64_t> segments = {2000, 0, 1000};
  absl::StatusOr<EncodedUpdate> e = EncodeUpdate(x, segments, UpdateCompression::kInt8, 3);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->scales.size(), 3u);
  EXPECT_EQ(e->payload.size(), x.size());
  EXPECT_EQ(e->scales[1], 0);
  EXPECT_GT(e->scales[2], 50 * e->scales[0]);
  absl::StatusOr<std::vector<float>> d = DecodeUpdate(*e);
  ASSERT_TRUE(d.ok()) << d.status();
  for (size_t i = 0; i < x.size(); ++i) {
    const float scale = e->scales[i < 2000 ? 0 : 2];
    EXPECT_LE(std::fabs((*d)[i] - x[i]), scale * (1 + 1e-5f)) << i;
  }
}

TEST(UpdateCodecTest, Int8IsUnbiased) {
  // Values between the codes; the mean of many independently seeded encodings converges to x
  // (the standard error of one draw is at most scale / 2).
  const std::vector<float> x = {1.0f, 0.3f, -0.77f, 0.013f, -0.5f, 0.0049f, 0.999f, -1.0f};
  const std::vector<int64_t> segments = {8};
  const int kDraws = 4000;
  std::vector<double> sum(x.size());
  float scale = 0;
  for (int k = 0; k < kDraws; ++k) {
    absl::StatusOr<EncodedUpdate> e = EncodeUpdate(x, segments, UpdateCompression::kInt8, k);
    ASSERT_TRUE(e.ok()) << e.status();
    scale = e->scales[0];
    absl::StatusOr<std::vector<float>> d = DecodeUpdate(*e);
    ASSERT_TRUE(d.ok()) << d.status();
    for (size_t i = 0; i < x.size(); ++i) sum[i] += (*d)[i];
  }
  const double standard_error = scale / 2 / std::sqrt(static_cast<double>(kDraws));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(sum[i] / kDraws, x[i], 4 * standard_error) << i;
  }
}

TEST(UpdateCodecTest, Int8IsReproducibleFromItsSeed) {
  const std::vector<float> x = Gaussian(1000, 1, 4);
  const std::vector<int64_t> segments = {600, 400};
  auto a = EncodeUpdate(x, segments, UpdateCompression::kInt8, 11);
  auto b = EncodeUpdate(x, segments, UpdateCompression::kInt8, 11);
  auto c = EncodeUpdate(x, segments, UpdateCompression::kInt8, 12);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->payload, b->payload);
  EXPECT_NE(a->payload, c->payload);
}

TEST(UpdateCodecTest, DecodesChunkByChunkAcrossSegments) {
  const std::vector<float> x = Gaussian(100, 1, 5);
  const std::vector<int64_t> segments = {30, 0, 45, 25};
  auto e = EncodeUpdate(x, segments, UpdateCompression::kInt8, 1);
  ASSERT_TRUE(e.ok());
  auto whole = DecodeUpdate(*e);
  ASSERT_TRUE(whole.ok());
  auto decoder = UpdateDecoder::Create(e->mode, e->size, e->segments, e->scales);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  std::vector<float> out;
  for (int64_t off = 0; off < 100; off += 16) {
    const int64_t n = std::min<int64_t>(16, 100 - off);
    ASSERT_TRUE(decoder->Decode(off, absl::string_view(e->payload).substr(off, n), &out).ok());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(out[i], (*whole)[off + i]) << off + i;
  }
}

TEST(UpdateCodecTest, RefusesMalformedHeaders) {
  using M = UpdateCompression;
  auto code = [](M m, int64_t size, std::vector<int64_t> seg, std::vector<float> sc) {
    return UpdateDecoder::Create(m, size, std::move(seg), std::move(sc)).status().code();
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code(M::kInt8, 10, {4, 6}, {1, 1}), absl::StatusCode::kOk);
  EXPECT_EQ(code(M::kInt8, -1, {}, {}), kBad);
  EXPECT_EQ(code(M::kInt8, 10, {4, 5}, {1, 1}), kBad);    // short of size
  EXPECT_EQ(code(M::kInt8, 10, {4, 7}, {1, 1}), kBad);    // past size
  EXPECT_EQ(code(M::kInt8, 10, {14, -4}, {1, 1}), kBad);  // negative
  EXPECT_EQ(code(M::kInt8, 10, {4, 6}, {1}), kBad);       // scales count
  EXPECT_EQ(code(M::kInt8, 10, {4, 6}, {1, -1}), kBad);   // negative scale
  EXPECT_EQ(code(M::kInt8, 10, {4, 6}, {1, std::nanf("")}), kBad);
  EXPECT_EQ(code(M::kInt8, 10, {4, 6}, {1, std::numeric_limits<float>::max()}), kBad);
  EXPECT_EQ(code(M::kF16, 10, {10}, {}), kBad);  // fp16 carries no segments
  std::vector<int64_t> many(kMaxUpdateSegments + 1, 0);
  EXPECT_EQ(code(M::kInt8, 0, many, std::vector<float>(many.size(), 0)), kBad);
}

TEST(UpdateCodecTest, RefusesMalformedPayloads) {
  auto int8 = UpdateDecoder::Create(UpdateCompression::kInt8, 4, {4}, {0.5f});
  auto fp16 = UpdateDecoder::Create(UpdateCompression::kF16, 4, {}, {});
  ASSERT_TRUE(int8.ok() && fp16.ok());
  std::vector<float> out;
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_TRUE(int8->Decode(0, std::string("\x01\x02\x03\x04", 4), &out).ok());
  EXPECT_EQ(int8->Decode(1, std::string(4, '\x01'), &out).code(), kBad);      // past the end
  EXPECT_EQ(int8->Decode(-1, std::string(1, '\x01'), &out).code(), kBad);     // before the start
  EXPECT_EQ(int8->Decode(0, std::string(1, '\x80'), &out).code(), kBad);      // code -128
  EXPECT_EQ(fp16->Decode(0, std::string(3, '\0'), &out).code(), kBad);        // half a value
  EXPECT_EQ(fp16->Decode(0, std::string("\x00\x7c", 2), &out).code(), kBad);  // +inf
  EXPECT_EQ(fp16->Decode(0, std::string("\x00\x7e", 2), &out).code(), kBad);  // NaN
  EncodedUpdate short_payload{UpdateCompression::kInt8, 4, {4}, {0.5f}, std::string(3, '\0')};
  EXPECT_EQ(DecodeUpdate(short_payload).status().code(), kBad);
}

TEST(UpdateCodecTest, EncodeRefusesNonFiniteValuesAndBadSegments) {
  const std::vector<float> x = {1, std::numeric_limits<float>::infinity()};
  EXPECT_EQ(EncodeUpdate(x, {{2}}, UpdateCompression::kInt8, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<float> big = {1e6f};
  EXPECT_EQ(EncodeUpdate(big, {{1}}, UpdateCompression::kF16, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(EncodeUpdate(big, {{1}}, UpdateCompression::kInt8, 0).ok());
  const std::vector<float> y = {1, 2};
  EXPECT_EQ(EncodeUpdate(y, {{3}}, UpdateCompression::kInt8, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant
