#ifndef SEXTANT_FEDERATION_INTERNAL_SECAGG_CONTEXT_H_
#define SEXTANT_FEDERATION_INTERNAL_SECAGG_CONTEXT_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "federation/secagg_config.h"

// Domain-separation strings shared by client and server: a key or ciphertext of one experiment,
// round or purpose is useless in any other.
namespace sextant::secagg_internal {

inline std::string MaskContext(const SecAggConfig& c) {
  return absl::StrCat("sextant-secagg-mask|", c.experiment_id.size(), ":", c.experiment_id, "|",
                      c.round);
}
inline std::string EncryptionContext(const SecAggConfig& c) {
  return absl::StrCat("sextant-secagg-enc|", c.experiment_id.size(), ":", c.experiment_id, "|",
                      c.round);
}
inline std::string SeedCommitmentContext(const SecAggConfig& c, int32_t client) {
  return absl::StrCat("sextant-secagg-seed|", c.experiment_id.size(), ":", c.experiment_id, "|",
                      c.round, "|", client);
}
// Associated data of the share ciphertext from `sender` to `recipient`.
inline std::string ShareAd(const SecAggConfig& c, int32_t sender, int32_t recipient) {
  return absl::StrCat("sextant-secagg-share|", c.experiment_id.size(), ":", c.experiment_id, "|",
                      c.round, "|from=", sender, "|to=", recipient);
}
// Plaintext of a share ciphertext: sender, recipient (4 bytes each, little-endian), then the five
// elements of the masking-key share and the five of the self-mask-seed share (8 bytes each).
inline constexpr size_t kSharePlaintextBytes = 8 + 2 * 5 * 8;
// With the 16-byte Poly1305 tag.
inline constexpr size_t kShareCiphertextBytes = kSharePlaintextBytes + 16;

inline uint64_t RingMask(int bits) { return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

}  // namespace sextant::secagg_internal

#endif  // SEXTANT_FEDERATION_INTERNAL_SECAGG_CONTEXT_H_
