// A counter-based random number generator: every draw is a pure function of (key, counter), so
// dropout masks and initial weights are reproducible, need no state beyond the seed and the
// position, and come out the same on every backend (the functions compile for CUDA devices too).
#ifndef SEXTANT_WORKER_TRAIN_COUNTER_RNG_H_
#define SEXTANT_WORKER_TRAIN_COUNTER_RNG_H_

#include <cstdint>

#if defined(__CUDACC__)
#define SEXTANT_HOST_DEVICE __host__ __device__
#else
#define SEXTANT_HOST_DEVICE
#endif

namespace sextant::train {

// The SplitMix64 finaliser: a bijection on 64-bit words with full avalanche.
SEXTANT_HOST_DEVICE inline uint64_t Mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A key for one stream of draws, e.g. (seed, step, layer). Different inputs give unrelated keys.
SEXTANT_HOST_DEVICE inline uint64_t StreamKey(uint64_t seed, uint64_t a, uint64_t b) {
  return Mix64(Mix64(Mix64(seed) ^ a) ^ (b * 0xD1B54A32D192ED03ull));
}

// The 64 random bits at `counter` in the stream `key`.
SEXTANT_HOST_DEVICE inline uint64_t RandomBits(uint64_t key, uint64_t counter) {
  return Mix64(key ^ Mix64(counter));
}

// A float uniform in [0, 1) with 24 random bits, at `counter` in the stream `key`.
SEXTANT_HOST_DEVICE inline float UniformFloat(uint64_t key, uint64_t counter) {
  return static_cast<float>(RandomBits(key, counter) >> 40) * (1.0f / 16777216.0f);
}

// A double uniform in (0, 1) with 53 random bits (never 0, so its log is finite).
SEXTANT_HOST_DEVICE inline double UniformOpenDouble(uint64_t key, uint64_t counter) {
  return (static_cast<double>(RandomBits(key, counter) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_COUNTER_RNG_H_
