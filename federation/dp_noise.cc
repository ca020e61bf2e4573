#include "federation/dp_noise.h"

#include <cmath>
#include <vector>

#include "federation/internal/secagg_crypto.h"

namespace sextant {

absl::Status ClipToL2Norm(absl::Span<float> x, double clip_norm, double* norm_before) {
  if (!(std::isfinite(clip_norm) && clip_norm > 0)) {
    return absl::InvalidArgumentError("dp: clip norm must be finite and > 0");
  }
  double sq = 0;
  for (float v : x) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("dp: non-finite value in update");
    sq += static_cast<double>(v) * v;
  }
  const double norm = std::sqrt(sq);
  if (norm_before) *norm_before = norm;
  if (norm > clip_norm) {
    const double scale = clip_norm / norm;
    for (float& v : x) v = static_cast<float>(v * scale);
  }
  return absl::OkStatus();
}

absl::Status AddGaussianNoise(absl::Span<float> x, double stddev,
                              const std::array<uint8_t, 32>& seed) {
  if (!(std::isfinite(stddev) && stddev >= 0)) {
    return absl::InvalidArgumentError("dp: noise stddev must be finite and >= 0");
  }
  secagg_internal::ChaChaDrbg rng(seed, /*domain=*/0x6e6f697365);
  constexpr size_t kBatch = 1024;  // pairs of uniforms per keystream call
  std::vector<uint64_t> words(2 * kBatch);
  for (size_t begin = 0; begin < x.size(); begin += 2 * kBatch) {
    rng.Fill(reinterpret_cast<uint8_t*>(words.data()), words.size() * sizeof(uint64_t));
    for (size_t p = 0; p < kBatch && begin + 2 * p < x.size(); ++p) {
      // u1 in (0, 1] so that log(u1) is finite.
      const double u1 = (static_cast<double>(words[2 * p] >> 11) + 1) * 0x1.0p-53;
      const double u2 = static_cast<double>(words[2 * p + 1] >> 11) * 0x1.0p-53;
      const double r = stddev * std::sqrt(-2 * std::log(u1));
      const double a = 2 * M_PI * u2;
      x[begin + 2 * p] += static_cast<float>(r * std::cos(a));
      if (begin + 2 * p + 1 < x.size()) x[begin + 2 * p + 1] += static_cast<float>(r * std::sin(a));
    }
  }
  return absl::OkStatus();
}

double DistributedNoiseStddev(double noise_multiplier, double sensitivity, int32_t threshold) {
  return noise_multiplier * sensitivity / std::sqrt(static_cast<double>(threshold));
}

}  // namespace sextant
