#ifndef SEXTANT_STRATEGIES_INTERNAL_SOBOL_SEQUENCE_H_
#define SEXTANT_STRATEGIES_INTERNAL_SOBOL_SEQUENCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace sextant::internal {

// Unscrambled Sobol points with Joe–Kuo direction numbers, 32 bits per coordinate (a
// coordinate x stands for x / 2^32). Point i is Boost.Random's point in Gray-code order, with
// one correction: Boost's engine starts at the second Sobol point (its constructor already
// XORs in the first direction number, so its first output is 1/2 in every dimension), and
// this class puts the origin back as point 0, so that points [0, 2^m) form a (t,m,s)-net.
// Not thread-safe.
class SobolSequence {
 public:
  // Returns InvalidArgument unless 1 <= dimension <= kMaxDimension.
  static absl::StatusOr<SobolSequence> Create(size_t dimension);

  // The number of dimensions Boost's Joe–Kuo table covers.
  static const size_t kMaxDimension;

  SobolSequence(SobolSequence&&) noexcept;
  SobolSequence& operator=(SobolSequence&&) noexcept;
  ~SobolSequence();

  size_t dimension() const { return dimension_; }

  // Returns point `index` (one value per dimension). Returns OutOfRange for an index of 2^32
  // or more, past the end of a 32-bit sequence.
  absl::StatusOr<std::vector<uint32_t>> Point(uint64_t index);

 private:
  struct Engine;
  SobolSequence(size_t dimension, std::unique_ptr<Engine> engine);

  size_t dimension_;
  std::unique_ptr<Engine> engine_;
};

// Returns x with its 32 bits in reverse order.
uint32_t ReverseBits(uint32_t x);

// A Laine–Karras style permutation of 32-bit words keyed by `key`: bit k of the result is bit
// k of x flipped by a key-dependent function of bits 0..k-1 only. A bijection.
uint32_t LaineKarrasPermutation(uint32_t x, uint64_t key);

// Hash-based Owen scrambling of a 32-bit fraction (Burley 2020): reverses the bits, applies
// LaineKarrasPermutation, and reverses back, so each bit is flipped by a random function of
// the bits above it. Values that share their top k bits keep sharing them, and the map is a
// bijection, so a set that is stratified into 2^k intervals stays stratified.
uint32_t OwenScramble(uint32_t x, uint64_t key);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_SOBOL_SEQUENCE_H_
