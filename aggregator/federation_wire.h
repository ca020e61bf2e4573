// What both ends of FederationService agree on besides the proto: the bounds each side checks
// before it allocates, the default chunk size, and how floats travel.
#ifndef SEXTANT_AGGREGATOR_FEDERATION_WIRE_H_
#define SEXTANT_AGGREGATOR_FEDERATION_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace sextant {

// The largest key attestation a SecAgg participant may send (its certificate and signature),
// relayed to each of its neighbours.
inline constexpr size_t kMaxAttestationCertificateBytes = 8192;
inline constexpr size_t kMaxAttestationSignatureBytes = 256;

// Floats per chunk by default: 1 MiB.
inline constexpr int64_t kDefaultChunkFloats = (1 << 20) / sizeof(float);

// The most bytes of an experiment a JoinPlan may carry, and of flags in all.
inline constexpr size_t kMaxJoinSpecBytes = size_t{4} << 20;
inline constexpr size_t kMaxJoinFlagBytes = 64 << 10;

// The longest cause a ParticipantFailure may carry.
inline constexpr size_t kMaxFailureErrorBytes = 4096;

// The floats of a chunk's bytes, copied into scratch: floats travel as their native
// little-endian bytes (every supported host is little-endian). A trailing partial float is
// dropped; the receiver checks lengths before it calls this.
inline absl::Span<const float> AsFloats(const std::string& bytes, std::vector<float>& scratch) {
  scratch.resize(bytes.size() / sizeof(float));
  std::memcpy(scratch.data(), bytes.data(), scratch.size() * sizeof(float));
  return scratch;
}

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_FEDERATION_WIRE_H_
