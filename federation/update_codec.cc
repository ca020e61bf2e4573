#include "federation/update_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tensors/dtype.h"

namespace sextant {
namespace {

constexpr float kInt8Max = 127.0f;
constexpr float kF16Overflow = 65520.0f;  // and above, binary16 rounds to infinity

// The SplitMix64 finaliser: the rounding draw of element i is a pure function of (seed, i), so
// an encoding is reproducible whatever order it is computed in.
uint64_t Mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 24 random bits.
float Uniform(uint64_t key, uint64_t i) {
  return static_cast<float>(Mix64(key ^ Mix64(i)) >> 40) * (1.0f / 16777216.0f);
}

absl::Status CheckSegments(absl::Span<const int64_t> segments, int64_t size) {
  if (static_cast<int64_t>(segments.size()) > kMaxUpdateSegments) {
    return absl::InvalidArgumentError(
        absl::StrCat("update has ", segments.size(), " segments, at most ", kMaxUpdateSegments));
  }
  int64_t sum = 0;
  for (int64_t s : segments) {
    if (s < 0 || s > size - sum) {
      return absl::InvalidArgumentError(
          absl::StrCat("update segments do not add up to its ", size, " values"));
    }
    sum += s;
  }
  if (sum != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("update segments add up to ", sum, " values, not ", size));
  }
  return absl::OkStatus();
}

void EncodeInt8Segment(absl::Span<const float> x, uint64_t key, int64_t first, float* scale,
                       char* out) {
  float max_abs = 0;
  for (float v : x) max_abs = std::max(max_abs, std::fabs(v));
  *scale = max_abs / kInt8Max;
  if (max_abs == 0) {
    std::memset(out, 0, x.size());
    return;
  }
  // Dividing by max_abs (not by the rounded scale) keeps |y| <= 127 up to one ulp; the clamp
  // takes care of that ulp.
  const float inv = kInt8Max / max_abs;
  for (size_t i = 0; i < x.size(); ++i) {
    const float y = x[i] * inv;
    const float low = std::floor(y);
    float q = low + (Uniform(key, static_cast<uint64_t>(first) + i) < y - low ? 1.0f : 0.0f);
    q = std::clamp(q, -kInt8Max, kInt8Max);
    out[i] = static_cast<char>(static_cast<int8_t>(q));
  }
}

}  // namespace

absl::string_view UpdateCompressionName(UpdateCompression mode) {
  switch (mode) {
    case UpdateCompression::kF16:
      return "fp16";
    case UpdateCompression::kInt8:
      return "int8";
    case UpdateCompression::kNone:
      break;
  }
  return "none";
}

std::optional<UpdateCompression> ParseUpdateCompression(absl::string_view name) {
  if (name == "none") return UpdateCompression::kNone;
  if (name == "fp16") return UpdateCompression::kF16;
  if (name == "int8") return UpdateCompression::kInt8;
  return std::nullopt;
}

int UpdateBytesPerElement(UpdateCompression mode) {
  switch (mode) {
    case UpdateCompression::kF16:
      return 2;
    case UpdateCompression::kInt8:
      return 1;
    case UpdateCompression::kNone:
      break;
  }
  return 4;
}

absl::StatusOr<EncodedUpdate> EncodeUpdate(absl::Span<const float> flat,
                                           absl::Span<const int64_t> segments,
                                           UpdateCompression mode, uint64_t seed) {
  const int64_t size = static_cast<int64_t>(flat.size());
  if (absl::Status s = CheckSegments(segments, size); !s.ok()) return s;
  for (size_t i = 0; i < flat.size(); ++i) {
    if (!std::isfinite(flat[i])) {
      return absl::InvalidArgumentError(absl::StrCat("update value ", i, " is not finite"));
    }
    if (mode == UpdateCompression::kF16 && std::fabs(flat[i]) >= kF16Overflow) {
      return absl::InvalidArgumentError(
          absl::StrCat("update value ", i, " is ", flat[i], ", beyond fp16's range"));
    }
  }
  EncodedUpdate e;
  e.mode = mode;
  e.size = size;
  e.payload.resize(static_cast<size_t>(size) * UpdateBytesPerElement(mode));
  if (mode == UpdateCompression::kNone) {
    std::memcpy(e.payload.data(), flat.data(), e.payload.size());
    return e;
  }
  if (mode == UpdateCompression::kF16) {
    absl::Status s = EncodeFromF32(DType::kF16, flat, absl::MakeSpan(e.payload));
    if (!s.ok()) return s;
    return e;
  }
  e.segments.assign(segments.begin(), segments.end());
  e.scales.resize(segments.size());
  const uint64_t key = Mix64(seed ^ 0x696E7438ull);  // "int8": apart from the seed's other uses
  int64_t at = 0;
  for (size_t s = 0; s < segments.size(); ++s) {
    EncodeInt8Segment(flat.subspan(at, segments[s]), key, at, &e.scales[s], e.payload.data() + at);
    at += segments[s];
  }
  return e;
}

absl::StatusOr<UpdateDecoder> UpdateDecoder::Create(UpdateCompression mode, int64_t size,
                                                    std::vector<int64_t> segments,
                                                    std::vector<float> scales) {
  if (size < 0) return absl::InvalidArgumentError("update size < 0");
  if (mode != UpdateCompression::kInt8) {
    if (!segments.empty() || !scales.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a ", UpdateCompressionName(mode), " update carries no segments or scales"));
    }
    return UpdateDecoder(mode, size, {}, {});
  }
  if (absl::Status s = CheckSegments(segments, size); !s.ok()) return s;
  if (scales.size() != segments.size()) {
    return absl::InvalidArgumentError(absl::StrCat("int8 update has ", scales.size(),
                                                   " scales for ", segments.size(), " segments"));
  }
  const float max_scale = std::numeric_limits<float>::max() / kInt8Max;
  for (size_t i = 0; i < scales.size(); ++i) {
    if (!(scales[i] >= 0 && scales[i] <= max_scale)) {
      return absl::InvalidArgumentError(absl::StrCat("int8 update scale ", i, " is ", scales[i],
                                                     ", outside [0, ", max_scale, "]"));
    }
  }
  std::vector<int64_t> ends(segments.size());
  int64_t at = 0;
  for (size_t i = 0; i < segments.size(); ++i) ends[i] = at += segments[i];
  return UpdateDecoder(mode, size, std::move(ends), std::move(scales));
}

absl::Status UpdateDecoder::Decode(int64_t offset, absl::string_view bytes,
                                   std::vector<float>* out) const {
  const int width = UpdateBytesPerElement(mode_);
  if (bytes.size() % width != 0) {
    return absl::InvalidArgumentError(absl::StrCat("chunk at ", offset, " holds ", bytes.size(),
                                                   " bytes, not whole ",
                                                   UpdateCompressionName(mode_), " values"));
  }
  const int64_t n = static_cast<int64_t>(bytes.size()) / width;
  if (offset < 0 || offset > size_ || n > size_ - offset) {
    return absl::InvalidArgumentError(absl::StrCat("chunk of ", n, " values at ", offset,
                                                   " leaves the update's ", size_, " values"));
  }
  out->resize(n);
  if (mode_ == UpdateCompression::kNone) {
    std::memcpy(out->data(), bytes.data(), bytes.size());
  } else if (mode_ == UpdateCompression::kF16) {
    absl::Status s = DecodeToF32(DType::kF16, absl::MakeConstSpan(bytes.data(), bytes.size()),
                                 absl::MakeSpan(*out));
    if (!s.ok()) return s;
  } else {
    // The segment holding `offset`, then a walk: chunks arrive in order, segments are few.
    size_t seg = std::upper_bound(ends_.begin(), ends_.end(), offset) - ends_.begin();
    for (int64_t i = 0; i < n; ++i) {
      while (ends_[seg] <= offset + i) ++seg;
      const int8_t q = static_cast<int8_t>(bytes[i]);
      if (q == -128) {
        return absl::InvalidArgumentError(
            absl::StrCat("int8 update code at ", offset + i, " is -128, outside [-127, 127]"));
      }
      (*out)[i] = static_cast<float>(q) * scales_[seg];
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite((*out)[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat("update value ", offset + i, " is not finite"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> DecodeUpdate(const EncodedUpdate& update) {
  absl::StatusOr<UpdateDecoder> d =
      UpdateDecoder::Create(update.mode, update.size, update.segments, update.scales);
  if (!d.ok()) return d.status();
  std::vector<float> out;
  if (absl::Status s = d->Decode(0, update.payload, &out); !s.ok()) return s;
  if (static_cast<int64_t>(out.size()) != update.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("update payload holds ", out.size(), " values, not ", update.size));
  }
  return out;
}

}  // namespace sextant
