#include "tensors/dtype.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sextant {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this code copies it as the host's layout");

namespace {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

uint16_t Load16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void Store16(char* p, uint16_t v) { std::memcpy(p, &v, 2); }

// Shifts `m` right by `shift` (1..31), rounding to nearest, ties to even.
uint32_t ShiftRoundEven(uint32_t m, int shift) {
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  return (rem > half || (rem == half && (q & 1))) ? q + 1 : q;
}

absl::Status SizeMismatch(DType dtype, size_t bytes, size_t elements) {
  return absl::InvalidArgumentError(
      absl::StrCat(bytes, " bytes are not ", elements, " ", DTypeName(dtype), " elements"));
}

}  // namespace

int DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

absl::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "?";
}

std::optional<DType> ParseDType(absl::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  return std::nullopt;
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return FromBits(sign | 0x7f800000 | (mant << 13));  // inf, NaN with payload
  if (exp != 0) return FromBits(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24 is exact in float.
  const float magnitude = static_cast<float>(mant) * 0x1p-24f;
  return FromBits(sign | Bits(magnitude));
}

uint16_t FloatToHalf(float value) {
  const uint32_t x = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t a = x & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7e00 | ((a >> 13) & 0x3ff);  // NaN, kept quiet
  if (a >= 0x477ff000) return sign | 0x7c00;  // >= 65520 (halfway past 65504) or infinity
  if (a >= 0x38800000) {                      // normal in half: >= 2^-14
    // Rebias the exponent (127 -> 15); a carry out of the mantissa bumps the exponent.
    return sign | static_cast<uint16_t>(ShiftRoundEven(a - 0x38000000, 13));
  }
  const int exp = static_cast<int>(a >> 23);
  if (exp < 101) return sign;  // below 2^-26, or a float subnormal: rounds to zero
  // A subnormal half counts units of 2^-24: (1.mant * 2^(exp-127)) / 2^-24 = m >> (126 - exp).
  const uint32_t m = (a & 0x7fffff) | 0x800000;
  return sign | static_cast<uint16_t>(ShiftRoundEven(m, 126 - exp));
}

float BFloat16ToFloat(uint16_t bits) { return FromBits(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToBFloat16(float value) {
  const uint32_t x = Bits(value);
  if ((x & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((x >> 16) | 0x0040);
  return static_cast<uint16_t>(ShiftRoundEven(x, 16));
}

absl::Status DecodeToF32(DType dtype, absl::Span<const char> in, absl::Span<float> out) {
  if (in.size() / DTypeSize(dtype) != out.size() || in.size() % DTypeSize(dtype) != 0) {
    return SizeMismatch(dtype, in.size(), out.size());
  }
  switch (dtype) {
    case DType::kF32:
      if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
      break;
    case DType::kF16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = HalfToFloat(Load16(in.data() + 2 * i));
      break;
    case DType::kBF16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = BFloat16ToFloat(Load16(in.data() + 2 * i));
      break;
  }
  return absl::OkStatus();
}

absl::Status EncodeFromF32(DType dtype, absl::Span<const float> in, absl::Span<char> out) {
  if (out.size() / DTypeSize(dtype) != in.size() || out.size() % DTypeSize(dtype) != 0) {
    return SizeMismatch(dtype, out.size(), in.size());
  }
  switch (dtype) {
    case DType::kF32:
      if (!in.empty()) std::memcpy(out.data(), in.data(), out.size());
      break;
    case DType::kF16:
      for (size_t i = 0; i < in.size(); ++i) Store16(out.data() + 2 * i, FloatToHalf(in[i]));
      break;
    case DType::kBF16:
      for (size_t i = 0; i < in.size(); ++i) Store16(out.data() + 2 * i, FloatToBFloat16(in[i]));
      break;
  }
  return absl::OkStatus();
}

}  // namespace sextant
