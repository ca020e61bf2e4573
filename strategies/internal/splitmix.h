#ifndef SEXTANT_STRATEGIES_INTERNAL_SPLITMIX_H_
#define SEXTANT_STRATEGIES_INTERNAL_SPLITMIX_H_

#include <cstdint>

namespace sextant::internal {

// The SplitMix64 output function (Steele, Lea & Flood 2014): a bijective 64-bit mix in which
// every input bit affects every output bit.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Returns a seed for sub-stream `stream` of `seed`: a pure function of both, so that stream i
// can be drawn without drawing streams 0..i-1, and nearby seeds or streams do not correlate.
inline uint64_t StreamSeed(uint64_t seed, uint64_t stream) {
  return SplitMix64(SplitMix64(seed) ^ stream);
}

// Maps 64 random bits to a double in [0, 1) using the top 53 bits, the same on every platform
// (unlike std::uniform_real_distribution, whose algorithm the standard leaves open).
inline double UnitFromBits(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_SPLITMIX_H_
