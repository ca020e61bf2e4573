// The element types a safetensors model file may hold here, and their conversions to and from
// float32 (aggregation accumulates in f32 and stores back in the model's own dtype).
#ifndef SEXTANT_TENSORS_DTYPE_H_
#define SEXTANT_TENSORS_DTYPE_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sextant {

// IEEE binary32, IEEE binary16 and bfloat16, each stored little-endian.
enum class DType { kF32, kF16, kBF16 };

// Bytes per element: 4, 2, 2.
int DTypeSize(DType dtype);

// The safetensors name: "F32", "F16", "BF16".
absl::string_view DTypeName(DType dtype);

// The dtype a safetensors name denotes (case-sensitive, as the format spells it); nullopt for
// any other name, including dtypes this library does not hold (F64, I32, ...).
std::optional<DType> ParseDType(absl::string_view name);

// Exact widening of a binary16 value: subnormals become normal floats, infinities stay infinite,
// a NaN stays a NaN with its sign and payload.
float HalfToFloat(uint16_t bits);

// Narrowing to binary16, rounding to nearest, ties to even. Values of magnitude 65520 and above
// become infinity, values at or below 2^-25 become (signed) zero, those in between that are below
// 2^-14 become subnormals. A NaN stays a quiet NaN with its sign.
uint16_t FloatToHalf(float value);

// Exact widening of a bfloat16 value (its bits are the upper half of a float's).
float BFloat16ToFloat(uint16_t bits);

// Narrowing to bfloat16, rounding to nearest, ties to even; overflow becomes infinity and a NaN
// stays a quiet NaN with its sign.
uint16_t FloatToBFloat16(float value);

// Decodes out.size() elements of `dtype` from the little-endian bytes `in`. InvalidArgument,
// with nothing written, unless in.size() == out.size() * DTypeSize(dtype).
absl::Status DecodeToF32(DType dtype, absl::Span<const char> in, absl::Span<float> out);

// Encodes `in` as `dtype` into the little-endian bytes `out`, rounding as above. InvalidArgument,
// with nothing written, unless out.size() == in.size() * DTypeSize(dtype).
absl::Status EncodeFromF32(DType dtype, absl::Span<const float> in, absl::Span<char> out);

}  // namespace sextant

#endif  // SEXTANT_TENSORS_DTYPE_H_
