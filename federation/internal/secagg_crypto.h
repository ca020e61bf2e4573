#ifndef SEXTANT_FEDERATION_INTERNAL_SECAGG_CRYPTO_H_
#define SEXTANT_FEDERATION_INTERNAL_SECAGG_CRYPTO_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

// The cryptographic primitives of secure aggregation, all from libsodium: X25519 key agreement,
// ChaCha20 for the mask PRG and the deterministic generator, XChaCha20-Poly1305 for shares.
namespace sextant::secagg_internal {

using Key32 = std::array<uint8_t, 32>;
using Nonce24 = std::array<uint8_t, 24>;

// Calls sodium_init once; false when libsodium cannot initialise (then nothing here is safe).
bool EnsureSodium();

// A deterministic random bit generator: the ChaCha20 keystream of a 32-byte seed, so that all of
// a client's secrets derive from the entropy it was handed (injected randomness). Not
// thread-safe.
class ChaChaDrbg {
 public:
  // `domain` separates independent streams drawn from one seed.
  ChaChaDrbg(const Key32& seed, uint64_t domain);
  void Fill(uint8_t* out, size_t len);
  uint64_t NextU64();
  Key32 NextKey();

 private:
  Key32 key_;
  std::array<uint8_t, 12> nonce_{};
  uint32_t block_ = 0;
};

// X25519: the public key of a secret key.
Key32 PublicKey(const Key32& secret_key);

// X25519 agreement hashed (BLAKE2b) with both public keys in a fixed order and `context`, so that
// both parties derive the same 32-byte key. InvalidArgument for a low-order peer key.
absl::StatusOr<Key32> AgreeKey(const Key32& secret_key, const Key32& own_public_key,
                               const Key32& peer_public_key, absl::string_view context);

// BLAKE2b-256 of `context` and the secret: a commitment that reveals nothing about a uniformly
// random 32-byte secret.
Key32 Commit(const Key32& secret, absl::string_view context);

// Adds (or subtracts) the PRG expansion of `seed` to acc[i] (mod 2^64; the caller reduces mod
// 2^ring_bits): element i takes 4 keystream bytes when ring_bits <= 32, else 8.
void AddMask(const Key32& seed, bool subtract, int ring_bits, absl::Span<uint64_t> acc);

// One mask of a sum of masks.
struct MaskTerm {
  Key32 seed;
  bool subtract = false;
};
// AddMask for every term, with the same result as calling it term by term, but chunk by chunk:
// each chunk of acc stays in cache while every term's keystream for it is added, so acc is read
// and written once however many terms there are.
// With first_element (a multiple of kMaskChunkElements), acc stands for the elements from
// there on of a longer vector, and takes their masks: a vector can be masked a part at a time.
void AddMasks(absl::Span<const MaskTerm> terms, int ring_bits, absl::Span<uint64_t> acc,
              size_t first_element = 0);
// The mask's keystream restarts every this many elements (see AddMasks' first_element).
inline constexpr size_t kMaskChunkElements = 4096;

// Bytes of ChaCha20 keystream one mask element costs.
inline size_t MaskBytesPerElement(int ring_bits) { return ring_bits <= 32 ? 4 : 8; }

// Raw ChaCha20-IETF keystream into out (for throughput measurement).
void Keystream(const Key32& key, absl::Span<uint8_t> out);

// XChaCha20-Poly1305-IETF. Open returns InvalidArgument when authentication fails (wrong key,
// nonce, associated data or a modified ciphertext).
std::vector<uint8_t> Seal(const Key32& key, const Nonce24& nonce, absl::string_view ad,
                          absl::Span<const uint8_t> plaintext);
absl::StatusOr<std::vector<uint8_t>> Open(const Key32& key, const Nonce24& nonce,
                                          absl::string_view ad,
                                          absl::Span<const uint8_t> ciphertext);

}  // namespace sextant::secagg_internal

#endif  // SEXTANT_FEDERATION_INTERNAL_SECAGG_CRYPTO_H_
