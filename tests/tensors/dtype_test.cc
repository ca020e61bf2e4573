#include "tensors/dtype.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float Float(uint32_t u) { return std::bit_cast<float>(u); }

TEST(DTypeTest, NamesParseBackAndOtherNamesAreRefused) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) {
    EXPECT_EQ(ParseDType(DTypeName(d)), d);
  }
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  for (const char* other : {"F64", "I32", "f32", "bf16", "", "F32 "}) {
    EXPECT_FALSE(ParseDType(other).has_value()) << other;
  }
}

TEST(DTypeTest, HalfDecodesNormalsSubnormalsAndSpecials) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(Bits(HalfToFloat(0x8000)), 0x80000000u);  // -0 keeps its sign
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_EQ(Bits(HalfToFloat(0xfd01)), 0xffa02000u);  // sign and payload kept
}

TEST(DTypeTest, HalfRoundsToNearestTiesToEven) {
  const float ulp = std::ldexp(1.0f, -10);             // at 1.0
  EXPECT_EQ(FloatToHalf(1.0f + ulp / 2), 0x3c00);      // tie: down to the even 0x3c00
  EXPECT_EQ(FloatToHalf(1.0f + 3 * ulp / 2), 0x3c02);  // tie: up to the even 0x3c02
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + ulp / 2, 2.0f)), 0x3c01);
  EXPECT_EQ(FloatToHalf(std::nextafter(1.0f + ulp / 2, 0.0f)), 0x3c00);
  EXPECT_EQ(FloatToHalf(-1.0f - ulp / 2), 0xbc00);
  // A carry out of the mantissa moves to the next binade: 2 - ulp/2 ties up to the even 2.0.
  EXPECT_EQ(FloatToHalf(2.0f - ulp / 2), 0x4000);
}

TEST(DTypeTest, HalfOverflowsToInfinityFrom65520) {
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the tie rounds to the even "65536" = infinity
  EXPECT_EQ(FloatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(FloatToHalf(1e30f), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(DTypeTest, HalfSubnormalsRoundAndUnderflowToSignedZero) {
  const float unit = std::ldexp(1.0f, -24);  // the smallest half subnormal
  EXPECT_EQ(FloatToHalf(unit), 0x0001);
  EXPECT_EQ(FloatToHalf(1023 * unit), 0x03ff);
  EXPECT_EQ(FloatToHalf(unit / 2), 0x0000);  // tie: down to the even 0
  EXPECT_EQ(FloatToHalf(std::nextafter(unit / 2, 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(3 * unit / 2), 0x0002);    // tie: up to the even 2
  EXPECT_EQ(FloatToHalf(5 * unit / 2), 0x0002);    // tie: down to the even 2
  EXPECT_EQ(FloatToHalf(1023.5f * unit), 0x0400);  // rounds up into the smallest normal
  EXPECT_EQ(FloatToHalf(unit / 4), 0x0000);
  EXPECT_EQ(FloatToHalf(-unit / 4), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
}

TEST(DTypeTest, HalfNaNStaysAQuietNaNWithItsSign) {
  const uint16_t h = FloatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(h & 0x7e00, 0x7e00);
  const uint16_t s = FloatToHalf(Float(0xff800001));  // a negative signalling NaN, low payload
  EXPECT_EQ(s & 0xfe00, 0xfe00);
  EXPECT_TRUE(std::isnan(HalfToFloat(s)));
}

TEST(DTypeTest, EveryHalfValueSurvivesARoundTripThroughFloat) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
    } else {
      ASSERT_EQ(FloatToHalf(f), h) << "half bits " << h;
    }
  }
}

#ifdef __FLT16_MAX__
// The compiler's own float -> _Float16 conversion rounds to nearest even as well (IEEE 754);
// every 997th float bit pattern must convert to the same bits.
TEST(DTypeTest, HalfNarrowingMatchesTheCompilersFloat16) {
  for (uint64_t u = 0; u <= 0xffffffffu; u += 997) {
    const float f = Float(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    const uint16_t want = std::bit_cast<uint16_t>(static_cast<_Float16>(f));
    ASSERT_EQ(FloatToHalf(f), want) << "float bits " << u;
  }
}
#endif

TEST(DTypeTest, BFloat16RoundsToNearestEvenAndKeepsSpecials) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xc040), -3.0f);
  EXPECT_EQ(FloatToBFloat16(Float(0x3f808000)), 0x3f80);  // tie: down to even
  EXPECT_EQ(FloatToBFloat16(Float(0x3f818000)), 0x3f82);  // tie: up to even
  EXPECT_EQ(FloatToBFloat16(Float(0x3f808001)), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(Float(0xbf808001)), 0xbf81);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);  // overflow: infinity
  EXPECT_EQ(FloatToBFloat16(Float(0x7f7f7fff)), 0x7f7f);
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(FloatToBFloat16(Float(0x00018000)), 0x0002);  // subnormals round the same way
  EXPECT_EQ(FloatToBFloat16(Float(0x00008000)), 0x0000);
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  // NaN: a low payload that truncation would turn into infinity stays a quiet NaN.
  EXPECT_EQ(FloatToBFloat16(Float(0x7f800001)), 0x7fc0);
  EXPECT_EQ(FloatToBFloat16(Float(0xff800001)), 0xffc0);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7fc0)));
}

TEST(DTypeTest, BulkConversionRoundTripsAndRefusesMismatchedSizes) {
  const std::vector<float> values = {0.0f, -1.5f, 3.25f, 1024.0f};
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16}) {
    std::string bytes(values.size() * DTypeSize(d), '\0');
    ASSERT_TRUE(EncodeFromF32(d, values, absl::MakeSpan(bytes)).ok());
    std::vector<float> back(values.size());
    ASSERT_TRUE(DecodeToF32(d, bytes, absl::MakeSpan(back)).ok());
    EXPECT_EQ(back, values) << DTypeName(d);
    std::vector<float> short_out(values.size() - 1);
    EXPECT_EQ(DecodeToF32(d, bytes, absl::MakeSpan(short_out)).code(),
              absl::StatusCode::kInvalidArgument);
    std::string odd(bytes.size() + 1, '\0');
    EXPECT_EQ(EncodeFromF32(d, values, absl::MakeSpan(odd)).code(),
              absl::StatusCode::kInvalidArgument);
  }
  // Little-endian storage: 1.0 as F16 is the bytes 00 3c.
  std::string one(2, '\0');
  const float v = 1.0f;
  ASSERT_TRUE(EncodeFromF32(DType::kF16, absl::MakeConstSpan(&v, 1), absl::MakeSpan(one)).ok());
  EXPECT_EQ(one, std::string("\x00\x3c", 2));
}

}  // namespace
}  // namespace sextant
