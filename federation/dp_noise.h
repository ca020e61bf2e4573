#ifndef SEXTANT_FEDERATION_DP_NOISE_H_
#define SEXTANT_FEDERATION_DP_NOISE_H_

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

// Client-level differential privacy for federated averaging (DP-FedAvg, McMahan et al. 2018):
// each client's update is clipped to L2 norm C, and Gaussian noise of standard deviation
// sigma * S is added to the weighted sum, where S = C * max_weight is the sum's L2 sensitivity to
// one client and sigma the noise multiplier that RdpAccountant accounts for.
//  - Central: the aggregator adds N(0, (sigma S)^2) once to the unmasked sum.
//  - Distributed: every client adds N(0, (sigma S)^2 / t) to its own (clipped, weighted) update
//    before masking, so that any t or more survivors' noise adds up to at least the central
//    amount and the aggregator never sees a less noisy sum. Quantisation happens after the noise
//    (post-processing), so the guarantee is that of the continuous Gaussian; the quantiser's
//    clip range must leave room for the noise (a few standard deviations above C).
namespace sextant {

// Scales x down to L2 norm clip_norm when it is longer, and returns its norm before clipping.
// InvalidArgument for clip_norm not finite and > 0 or a non-finite value in x.
absl::Status ClipToL2Norm(absl::Span<float> x, double clip_norm, double* norm_before = nullptr);

// Adds independent N(0, stddev^2) noise to every coordinate, drawn from a ChaCha20 stream keyed
// by `seed` (Box-Muller on 53-bit uniforms). The seed must be fresh random bytes for every call
// in production (e.g. randombytes_buf); tests pass fixed seeds. InvalidArgument for stddev not
// finite and >= 0.
absl::Status AddGaussianNoise(absl::Span<float> x, double stddev,
                              const std::array<uint8_t, 32>& seed);

// The per-client standard deviation of distributed noise: sigma * sensitivity / sqrt(t).
double DistributedNoiseStddev(double noise_multiplier, double sensitivity, int32_t threshold);

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_DP_NOISE_H_
