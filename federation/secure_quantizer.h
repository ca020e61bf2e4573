#ifndef SEXTANT_FEDERATION_SECURE_QUANTIZER_H_
#define SEXTANT_FEDERATION_SECURE_QUANTIZER_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sextant {

// Options of SecureQuantizer.
struct SecureQuantizerOptions {
  double clip = 1.0;        // each coordinate is clipped to [-clip, clip]; default 1
  int bits = 16;            // levels: x -> q in [-L, L], L = 2^(bits-1) - 1; 2..32; default 16
  int64_t max_weight = 1;   // client weights are integers in [1, max_weight]; default 1
  int64_t max_clients = 0;  // n, the most inputs one sum may hold; default 0 (refused)
  int ring_bits = 0;        // Z_{2^ring_bits}; 0 (default) picks RequiredRingBits
};

// Encodes a client's update for secure weighted averaging, and decodes the masked sum into the
// weighted mean. A client with update x and integer weight w sends (w * q(x), w) in Z_{2^k}:
// q clips each coordinate to [-clip, clip] and rounds x * L / clip stochastically (up with
// probability equal to the fractional part, so E[q] = x * L / clip). The last ring element is w.
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
  // max_clients < 1, a ring over 64 bits, or a ring_bits too small for the bound above.
  static absl::StatusOr<SecureQuantizer> Create(const SecureQuantizerOptions& options);

  // The smallest k with 2 * L * n * max_weight < 2^k (65 when none fits in 64 bits).
  static int RequiredRingBits(int bits, int64_t max_clients, int64_t max_weight);

  // Writes the encoding of (x, weight) into out (x.size() + 1 elements). `seed` drives the
  // stochastic rounding. InvalidArgument for a wrong out size, a weight outside [1, max_weight]
  // or a NaN in x (+-Inf are clipped).
  absl::Status Encode(absl::Span<const float> x, int64_t weight, uint64_t seed,
                      absl::Span<uint64_t> out) const;

  // Decodes a sum of encodings (mean.size() + 1 elements) into the weighted mean and returns the
  // total weight. FailedPrecondition when the total weight is 0; InvalidArgument for a wrong size
  // or a total weight above n * max_weight (not a sum of valid encodings).
  absl::StatusOr<int64_t> DecodeMean(absl::Span<const uint64_t> sum, absl::Span<float> mean) const;

  int ring_bits() const { return ring_bits_; }
  int64_t levels() const { return levels_; }
  // The deterministic per-coordinate error bound clip / L.
  double max_error() const { return options_.clip / static_cast<double>(levels_); }

 private:
  SecureQuantizer(const SecureQuantizerOptions& options, int ring_bits);
  SecureQuantizerOptions options_;
  int ring_bits_;
  int64_t levels_;
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_SECURE_QUANTIZER_H_
