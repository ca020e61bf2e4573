#ifndef SEXTANT_FEDERATION_SECURE_QUANTIZER_H_
#define SEXTANT_FEDERATION_SECURE_QUANTIZER_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "federation/ring_vector.h"

namespace sextant {

// Options of SecureQuantizer.
struct SecureQuantizerOptions {
  double clip = 1.0;        // each coordinate is clipped to [-clip, clip]; default 1
  int bits = 16;            // levels: x -> q in [-L, L], L = 2^(bits-1) - 1; 2..32; default 16
  int64_t max_weight = 1;   // client weights are integers in [1, max_weight]; default 1
  int64_t max_clients = 0;  // n, the most inputs one sum may hold; default 0 (refused)
  int ring_bits = 0;        // Z_{2^ring_bits}; 0 (default) picks RequiredRingBits
  // Per-tensor ranges: x is cut into `segments` (element counts, the model layout's tensors in
  // order), and the coordinates of segment i clip to segment_clips[i] instead of clip. Both
  // empty (default): one clip for every coordinate.
  std::vector<int64_t> segments;
  std::vector<double> segment_clips;
};

// Per-tensor ranges for the next round of int8 secure aggregation, from the last round's
// (public) mean update: headroom times the largest |value| of each segment, and at least
// min_clip (a tensor that did not move keeps a range). A client's update may reach past its
// region's mean; what lies beyond the range is clipped. Segments past mean's end count 0.
std::vector<double> SegmentClipsFromMean(absl::Span<const float> mean,
                                         absl::Span<const int64_t> segments, double headroom,
                                         double min_clip);

// Encodes a client's update for secure weighted averaging, and decodes the masked sum into the
// weighted mean. A client with update x and integer weight w sends (w * q(x), w) in Z_{2^k}:
// q clips each coordinate to [-clip, clip] and rounds x * L / clip stochastically (up with
// probability equal to the fractional part, so E[q] = x * L / clip). The last ring element is w.
// With segment_clips, each segment has its own clip in place of `clip` (so its own step
// clip_i / L), everywhere below.
//
// Overflow is impossible by construction: |sum_i w_i q_i| <= L * n * max_weight, and Create
// refuses a ring unless 2 * L * n * max_weight < 2^k, so the signed sum is read back exactly.
//
// Error. Per coordinate, |decoded mean - sum_i w_i clip(x_i) / sum_i w_i| < clip / L (each
// client's rounding moves its value by less than one level); the rounding is unbiased, with
// standard deviation at most (clip / L) * sqrt(sum w_i^2) / (2 sum w_i).
// Immutable; thread-safe.
class SecureQuantizer {
 public:
  // InvalidArgument for clip not finite and > 0, bits outside 2..32, max_weight < 1,
  // max_clients < 1, a ring over 64 bits, a ring_bits too small for the bound above, or
  // segments and segment_clips of different lengths, more than kMaxUpdateSegments of them, a
  // negative segment or a segment clip not finite and > 0.
  static absl::StatusOr<SecureQuantizer> Create(const SecureQuantizerOptions& options);

  // The smallest k with 2 * L * n * max_weight < 2^k (65 when none fits in 64 bits).
  static int RequiredRingBits(int bits, int64_t max_clients, int64_t max_weight);

  // Writes the encoding of (x, weight) into out (x.size() + 1 elements). `seed` drives the
  // stochastic rounding. InvalidArgument for a wrong out size, segments that do not sum to
  // x.size(), a weight outside [1, max_weight] or a NaN in x (+-Inf are clipped).
  absl::Status Encode(absl::Span<const float> x, int64_t weight, uint64_t seed,
                      absl::Span<uint64_t> out) const;
  // The same encoding into a RingVector in this quantizer's ring (x.size() + 1 elements, packed
  // at ring_bits each), written a block at a time: the 64-bit words are never whole in memory.
  // Errors as Encode.
  absl::StatusOr<RingVector> Encode(absl::Span<const float> x, int64_t weight, uint64_t seed) const;

  // Decodes a sum of encodings (mean.size() + 1 elements) into the weighted mean and returns the
  // total weight. FailedPrecondition when the total weight is 0; InvalidArgument for a wrong size
  // (segments included), a total weight above n * max_weight, or an element beyond L times the
  // total weight (either is not a sum of valid encodings: a client lied inside its masked input).
  absl::StatusOr<int64_t> DecodeMean(absl::Span<const uint64_t> sum, absl::Span<float> mean) const;
  // The same for a sum held in a RingVector; also InvalidArgument for a ring other than this
  // quantizer's.
  absl::StatusOr<int64_t> DecodeMean(const RingVector& sum, absl::Span<float> mean) const;
  // DecodeMean that consumes the sum: its memory is given back chunk by chunk as it is decoded,
  // so that the sum and the mean are never both whole in memory.
  absl::StatusOr<int64_t> ConsumeMean(RingVector sum, absl::Span<float> mean) const;

  int ring_bits() const { return ring_bits_; }
  int64_t levels() const { return levels_; }
  // The deterministic per-coordinate error bound clip / L (the largest segment clip's).
  double max_error() const;

 private:
  SecureQuantizer(const SecureQuantizerOptions& options, int ring_bits);
  // The clip ranges of an n-element update as (end offset, clip) in order, or InvalidArgument
  // when the segments do not sum to n.
  absl::StatusOr<std::vector<std::pair<size_t, double>>> Ranges(size_t n) const;
  absl::Status CheckSum(const RingVector& sum, size_t mean_size) const;
  // Encodes x[begin, begin + out.size()) into out, as Encode does for those elements (the
  // rounding stream is counter-based: element i's draw depends on seed and i alone).
  absl::Status EncodeRange(absl::Span<const float> x, int64_t weight, uint64_t seed, size_t begin,
                           const std::vector<std::pair<size_t, double>>& ranges,
                           absl::Span<uint64_t> out) const;
  // Decodes a chunk at a time: read(offset, out) gives the sum's elements [offset, offset +
  // out.size()); done(offset, count), when given, follows each chunk decoded.
  absl::StatusOr<int64_t> Decode(uint64_t total, absl::Span<float> mean,
                                 const std::function<void(size_t, absl::Span<uint64_t>)>& read,
                                 const std::function<void(size_t, size_t)>& done) const;
  SecureQuantizerOptions options_;
  int ring_bits_;
  int64_t levels_;
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_SECURE_QUANTIZER_H_
