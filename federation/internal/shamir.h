#ifndef SEXTANT_FEDERATION_INTERNAL_SHAMIR_H_
#define SEXTANT_FEDERATION_INTERNAL_SHAMIR_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "federation/internal/secagg_crypto.h"

// Shamir t-of-n secret sharing of 32-byte secrets over the prime field GF(2^61 - 1). A secret is
// cut into five field elements (four of 7 bytes, one of 4 bytes), each shared with its own random
// polynomial of degree t - 1; a share is the five evaluations at the holder's x (>= 1).
namespace sextant::secagg_internal {

inline constexpr uint64_t kShamirPrime = (uint64_t{1} << 61) - 1;
inline constexpr int kShareElements = 5;
using FieldShare = std::array<uint64_t, kShareElements>;

// Shares of `secret` for holders xs (distinct, >= 1), threshold t (1 <= t <= xs.size()).
std::vector<FieldShare> ShamirSplit(const Key32& secret, int threshold,
                                    absl::Span<const uint32_t> xs, ChaChaDrbg& rng);

// The secret from at least `threshold` shares (x, share); uses the first `threshold`.
// InvalidArgument for too few shares, repeated or zero x, elements outside the field, or a result
// that does not decode to 32 bytes (shares that do not belong together).
absl::StatusOr<Key32> ShamirReconstruct(absl::Span<const std::pair<uint32_t, FieldShare>> shares,
                                        int threshold);

}  // namespace sextant::secagg_internal

#endif  // SEXTANT_FEDERATION_INTERNAL_SHAMIR_H_
