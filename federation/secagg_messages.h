#ifndef SEXTANT_FEDERATION_SECAGG_MESSAGES_H_
#define SEXTANT_FEDERATION_SECAGG_MESSAGES_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "federation/ring_vector.h"

// The plain messages of secure aggregation (SecAggClient <-> SecAggServer). The transport copies
// them field by field into its wire format; they hold no pointers. Every message carries the
// experiment id, the round, the stage it belongs to, its sender and its recipient (client indices
// 0..n-1, or kSecAggServer).
//
//   stage           client -> server        server -> client
//   kAdvertiseKeys  SecAggAdvertiseKeys     (round start: SecAggConfig)
//   kShareKeys      SecAggShareKeys         SecAggKeyDirectory (opens the stage)
//   kMaskedInput    SecAggMaskedInput       SecAggShareDelivery (opens the stage)
//   kUnmask         SecAggUnmaskResponse    SecAggUnmaskRequest (opens the stage)
namespace sextant {

enum class SecAggStage : int32_t {
  kAdvertiseKeys = 0,
  kShareKeys = 1,
  kMaskedInput = 2,
  kUnmask = 3,
  kDone = 4,     // the server produced the sum
  kAborted = 5,  // the round aborted; nothing was or will be unmasked
};
absl::string_view SecAggStageName(SecAggStage stage);

inline constexpr int32_t kSecAggServer = -1;

struct SecAggHeader {
  std::string experiment_id;
  int64_t round = 0;
  SecAggStage stage = SecAggStage::kAdvertiseKeys;
  int32_t sender = kSecAggServer;
  int32_t recipient = kSecAggServer;
};

using SecAggPublicKey = std::array<uint8_t, 32>;

struct SecAggAdvertiseKeys {
  SecAggHeader header;
  SecAggPublicKey encryption_key;  // X25519, for the share ciphertexts
  SecAggPublicKey masking_key;     // X25519, for the pairwise masks
  // BLAKE2b commitment to the self-mask seed, so that the server detects a wrong reconstruction
  // (a corrupted share) instead of returning a wrong sum.
  std::array<uint8_t, 32> seed_commitment{};
};

struct SecAggPeerKeys {
  int32_t client = 0;
  SecAggPublicKey encryption_key;
  SecAggPublicKey masking_key;
};
// The recipient's holders (neighbours and itself) that advertised keys.
struct SecAggKeyDirectory {
  SecAggHeader header;
  std::vector<SecAggPeerKeys> peers;
};

// XChaCha20-Poly1305 of (sender, recipient, the share of the masking key, the share of the
// self-mask seed); the associated data binds experiment, round, sender and recipient.
struct SecAggEncryptedShare {
  int32_t sender = 0;
  int32_t recipient = 0;
  std::array<uint8_t, 24> nonce{};
  std::vector<uint8_t> ciphertext;
};
struct SecAggShareKeys {  // one ciphertext for every other peer of the sender's directory
  SecAggHeader header;
  std::vector<SecAggEncryptedShare> shares;
};
struct SecAggShareDelivery {  // the ciphertexts addressed to the recipient
  SecAggHeader header;
  std::vector<SecAggEncryptedShare> shares;
};

struct SecAggMaskedInput {
  SecAggHeader header;
  std::vector<uint64_t> values;  // vector_length elements < 2^ring_bits
};

// Survivors: holders whose masked input arrived (reveal their self-mask seed share); dropped:
// holders that shared keys but sent no masked input (reveal their masking-key share).
struct SecAggUnmaskRequest {
  SecAggHeader header;
  std::vector<int32_t> survivors;
  std::vector<int32_t> dropped;
};

enum class SecAggShareKind : int32_t { kSelfMaskSeed = 0, kMaskingKey = 1 };
struct SecAggRevealedShare {
  int32_t owner = 0;
  SecAggShareKind kind = SecAggShareKind::kSelfMaskSeed;
  std::array<uint64_t, 5> share{};  // GF(2^61 - 1) elements
};
struct SecAggUnmaskResponse {
  SecAggHeader header;
  std::vector<SecAggRevealedShare> shares;
};

// The result of a round: the sum over `contributors` (sorted) of their inputs, mod 2^ring_bits.
struct SecAggResult {
  RingVector sum;
  std::vector<int32_t> contributors;
};

// Bytes a message takes on the wire in a compact binary encoding (fixed-width fields, strings
// with a 4-byte length, the masked vector packed at ring_bits per element). Used for accounting
// in the benchmark; a protobuf encoding is within a few bytes per field of it.
size_t WireSize(const SecAggHeader& m);
size_t WireSize(const SecAggAdvertiseKeys& m);
size_t WireSize(const SecAggKeyDirectory& m);
size_t WireSize(const SecAggShareKeys& m);
size_t WireSize(const SecAggShareDelivery& m);
size_t WireSize(const SecAggMaskedInput& m, int ring_bits);
size_t WireSize(const SecAggUnmaskRequest& m);
size_t WireSize(const SecAggUnmaskResponse& m);

// Packs ring elements at `bits` per element, little-endian bit order (ceil(n * bits / 8)
// bytes). Elements must be < 2^bits (higher bits are dropped).
std::string PackRingVector(absl::Span<const uint64_t> values, int bits);
// Inverse of PackRingVector; InvalidArgument when packed has the wrong size.
absl::StatusOr<std::vector<uint64_t>> UnpackRingVector(absl::string_view packed, int bits,
                                                       size_t count);
// The same into out (out.size() elements), without allocating.
absl::Status UnpackRingVectorInto(absl::string_view packed, int bits, absl::Span<uint64_t> out);

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_SECAGG_MESSAGES_H_
