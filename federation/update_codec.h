// Compressed plaintext updates (federation.update_compression): a client's flat f32 update delta
// encoded as IEEE binary16 or as int8 per-tensor scaled with unbiased stochastic rounding, and
// decoded back to f32 by the aggregator that receives it, before anything aggregates it.
//
// The flat vector is cut into segments, the element counts of the model layout's tensors in
// order. fp16 ignores them; int8 gives each segment its own scale = max|x| / 127 (0 for a segment
// of zeros) and sends each x as a code q in [-127, 127], x / scale rounded down or up with
// probability equal to the fractional part, so that E[q * scale] = x and |x - q * scale| <= scale.
// The rounding draws are a pure function of (seed, element index): the same update, segments and
// seed always give the same bytes.
#ifndef SEXTANT_FEDERATION_UPDATE_CODEC_H_
#define SEXTANT_FEDERATION_UPDATE_CODEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sextant {

enum class UpdateCompression { kNone, kF16, kInt8 };

// "none", "fp16", "int8".
absl::string_view UpdateCompressionName(UpdateCompression mode);

// The mode a name denotes (as UpdateCompressionName spells it); nullopt for any other.
std::optional<UpdateCompression> ParseUpdateCompression(absl::string_view name);

// Wire bytes per element: 4, 2, 1.
int UpdateBytesPerElement(UpdateCompression mode);

// The most segments (tensors) an encoded update may have; a receiver refuses more before it
// allocates anything for them.
inline constexpr int64_t kMaxUpdateSegments = 1 << 16;

// An encoded update: payload holds size * UpdateBytesPerElement(mode) little-endian bytes; scales
// holds one per segment for kInt8 and is empty otherwise.
struct EncodedUpdate {
  UpdateCompression mode = UpdateCompression::kNone;
  int64_t size = 0;               // elements
  std::vector<int64_t> segments;  // element counts, summing to size
  std::vector<float> scales;
  std::string payload;
};

// Encodes `flat` cut into `segments` (see the file comment); seed keys int8's rounding draws.
// InvalidArgument when the segments are negative, more than kMaxUpdateSegments, or do not sum to
// flat.size(), when a value is NaN or infinite, or for kF16 when a value's magnitude is 65520 or
// more (binary16 would hold it as infinity).
absl::StatusOr<EncodedUpdate> EncodeUpdate(absl::Span<const float> flat,
                                           absl::Span<const int64_t> segments,
                                           UpdateCompression mode, uint64_t seed);

// Decodes a peer's encoded update piece by piece, as its chunks arrive. Not thread-safe.
class UpdateDecoder {
 public:
  // Checks the header a peer sent before any payload: InvalidArgument when size < 0, for kInt8
  // when there are more than kMaxUpdateSegments segments, a negative one, a sum other than size,
  // a scales count other than the segments count, or a scale that is negative, NaN, or so large
  // that 127 * scale overflows; for other modes when segments or scales are not empty.
  static absl::StatusOr<UpdateDecoder> Create(UpdateCompression mode, int64_t size,
                                              std::vector<int64_t> segments,
                                              std::vector<float> scales);

  UpdateCompression mode() const { return mode_; }

  // Decodes the elements [offset, offset + n) from `bytes` into `out` (resized to n), n =
  // bytes.size() / UpdateBytesPerElement(mode). InvalidArgument, with out unspecified, when bytes
  // is not a whole number of elements, the range leaves [0, size], an int8 code is -128, or a
  // decoded value is NaN or infinite.
  absl::Status Decode(int64_t offset, absl::string_view bytes, std::vector<float>* out) const;

 private:
  UpdateDecoder(UpdateCompression mode, int64_t size, std::vector<int64_t> ends,
                std::vector<float> scales)
      : mode_(mode), size_(size), ends_(std::move(ends)), scales_(std::move(scales)) {}

  UpdateCompression mode_;
  int64_t size_;
  std::vector<int64_t> ends_;  // kInt8: each segment's end offset
  std::vector<float> scales_;
};

// The whole of `update` decoded to f32 (UpdateDecoder::Create, then Decode over all of it).
absl::StatusOr<std::vector<float>> DecodeUpdate(const EncodedUpdate& update);

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_UPDATE_CODEC_H_
