#include "strategies/internal/sobol_sequence.h"

#include <boost/random/sobol.hpp>
#include <exception>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "strategies/internal/splitmix.h"

namespace sextant::internal {

struct SobolSequence::Engine {
  explicit Engine(size_t dimension) : sobol(dimension) {}
  // 32-bit words with 32 direction numbers per dimension: the MSB of each word is the 1/2 digit.
  boost::random::sobol_engine<uint32_t, 32> sobol;
};

const size_t SobolSequence::kMaxDimension = boost::random::default_sobol_table::max_dimension;

SobolSequence::SobolSequence(size_t dimension, std::unique_ptr<Engine> engine)
    : dimension_(dimension), engine_(std::move(engine)) {}
SobolSequence::SobolSequence(SobolSequence&&) noexcept = default;
SobolSequence& SobolSequence::operator=(SobolSequence&&) noexcept = default;
SobolSequence::~SobolSequence() = default;

absl::StatusOr<SobolSequence> SobolSequence::Create(size_t dimension) {
  if (dimension == 0 || dimension > kMaxDimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("Sobol dimension must be in [1, ", kMaxDimension, "], got ", dimension));
  }
  try {
    return SobolSequence(dimension, std::make_unique<Engine>(dimension));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("Boost sobol engine: ", e.what()));
  }
}

absl::StatusOr<std::vector<uint32_t>> SobolSequence::Point(uint64_t index) {
  std::vector<uint32_t> point(dimension_, 0);
  if (index == 0) return point;  // the origin, which Boost's engine never emits
  if (index > UINT32_MAX) {
    return absl::OutOfRangeError(absl::StrCat("Sobol index ", index, " is past 2^32 - 1"));
  }
  try {
    // Boost's sequence number s holds Gray-code point s + 1; seed() jumps there directly, so
    // the answer does not depend on which points were asked for before.
    engine_->sobol.seed(static_cast<uint32_t>(index - 1));
    for (uint32_t& x : point) x = engine_->sobol();
  } catch (const std::exception& e) {
    return absl::OutOfRangeError(absl::StrCat("Boost sobol engine: ", e.what()));
  }
  return point;
}

uint32_t ReverseBits(uint32_t x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
  x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
  return (x >> 16) | (x << 16);
}

uint32_t LaineKarrasPermutation(uint32_t x, uint64_t key) {
  // Each step below keeps the Laine–Karras property (bit k changes by a function of the lower
  // bits only): adding carries upward; multiplying by an odd number is x plus an even multiple
  // of x; and bit k of x times an even number depends on bits below k alone. The key picks
  // every constant, so each seed gets its own scramble. Measured over random keys, the flip of
  // each of the first three digits, as a function of the digits above it, takes every
  // possible function with near-equal frequency, as true Owen scrambling would; two multiply
  // rounds instead of three were visibly lopsided by the third digit.
  const uint64_t k1 = SplitMix64(key);
  const uint64_t k2 = SplitMix64(k1);
  const auto low = [](uint64_t k) { return static_cast<uint32_t>(k); };
  const auto even_high = [](uint64_t k) { return static_cast<uint32_t>(k >> 32) & ~1u; };
  x += low(key);
  x ^= x * even_high(key);
  x *= low(k1) | 1u;
  x ^= x * even_high(k1);
  x += low(k2);
  x ^= x * even_high(k2);
  return x;
}

uint32_t OwenScramble(uint32_t x, uint64_t key) {
  return ReverseBits(LaineKarrasPermutation(ReverseBits(x), key));
}

}  // namespace sextant::internal
