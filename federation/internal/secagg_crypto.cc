#include "federation/internal/secagg_crypto.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"

namespace sextant::secagg_internal {

bool EnsureSodium() {
  static const bool ok = sodium_init() >= 0;
  return ok;
}

ChaChaDrbg::ChaChaDrbg(const Key32& seed, uint64_t domain) : key_(seed) {
  EnsureSodium();
  std::memcpy(nonce_.data(), &domain, sizeof(domain));
}

void ChaChaDrbg::Fill(uint8_t* out, size_t len) {
  std::memset(out, 0, len);
  crypto_stream_chacha20_ietf_xor_ic(out, out, len, nonce_.data(), block_, key_.data());
  // Whole blocks are consumed so that no keystream byte is ever handed out twice.
  block_ += static_cast<uint32_t>((len + 63) / 64);
}

uint64_t ChaChaDrbg::NextU64() {
  uint8_t buf[8];
  Fill(buf, sizeof(buf));
  uint64_t v;
  std::memcpy(&v, buf, sizeof(v));
  return v;
}

Key32 ChaChaDrbg::NextKey() {
  Key32 k;
  Fill(k.data(), k.size());
  return k;
}

Key32 PublicKey(const Key32& secret_key) {
  EnsureSodium();
  Key32 pk;
  crypto_scalarmult_base(pk.data(), secret_key.data());
  return pk;
}

absl::StatusOr<Key32> AgreeKey(const Key32& secret_key, const Key32& own_public_key,
                               const Key32& peer_public_key, absl::string_view context) {
  EnsureSodium();
  uint8_t shared[crypto_scalarmult_BYTES];
  if (crypto_scalarmult(shared, secret_key.data(), peer_public_key.data()) != 0) {
    return absl::InvalidArgumentError("secagg: peer public key has low order");
  }
  const Key32& lo = std::min(own_public_key, peer_public_key);
  const Key32& hi = std::max(own_public_key, peer_public_key);
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, 32);
  crypto_generichash_update(&st, shared, sizeof(shared));
  crypto_generichash_update(&st, lo.data(), lo.size());
  crypto_generichash_update(&st, hi.data(), hi.size());
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(context.data()), context.size());
  Key32 key;
  crypto_generichash_final(&st, key.data(), key.size());
  sodium_memzero(shared, sizeof(shared));
  return key;
}

Key32 Commit(const Key32& secret, absl::string_view context) {
  EnsureSodium();
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, 32);
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(context.data()), context.size());
  crypto_generichash_update(&st, secret.data(), secret.size());
  Key32 out;
  crypto_generichash_final(&st, out.data(), out.size());
  return out;
}

namespace {
constexpr size_t kChunkElements = kMaskChunkElements;

// The PRG output for chunk c (kChunkElements words) is the ChaCha20-IETF keystream under nonce
// c from counter 0, so that no input buffer has to be zeroed for an XOR; chunks are 16 or 32 KiB,
// far below the 256 GiB one nonce allows.
template <typename Word>
void AddMaskWords(absl::Span<const MaskTerm> terms, absl::Span<uint64_t> acc, uint64_t chunk) {
  alignas(64) Word words[kChunkElements];
  uint8_t nonce[crypto_stream_chacha20_ietf_NONCEBYTES] = {};
  for (size_t begin = 0; begin < acc.size(); begin += kChunkElements, ++chunk) {
    const size_t len = std::min(kChunkElements, acc.size() - begin);
    std::memcpy(nonce, &chunk, sizeof(chunk));
    uint64_t* a = acc.data() + begin;
    for (const MaskTerm& term : terms) {
      crypto_stream_chacha20_ietf(reinterpret_cast<uint8_t*>(words), len * sizeof(Word), nonce,
                                  term.seed.data());
      if (term.subtract) {
        for (size_t i = 0; i < len; ++i) a[i] -= words[i];
      } else {
        for (size_t i = 0; i < len; ++i) a[i] += words[i];
      }
    }
  }
}
}  // namespace

void AddMasks(absl::Span<const MaskTerm> terms, int ring_bits, absl::Span<uint64_t> acc,
              size_t first_element) {
  EnsureSodium();
  const uint64_t first_chunk = first_element / kChunkElements;
  // A 32-bit word reduced mod 2^k (k <= 32) is uniform in Z_2^k, and so is its negation.
  if (ring_bits <= 32) {
    AddMaskWords<uint32_t>(terms, acc, first_chunk);
  } else {
    AddMaskWords<uint64_t>(terms, acc, first_chunk);
  }
}

void AddMask(const Key32& seed, bool subtract, int ring_bits, absl::Span<uint64_t> acc) {
  const MaskTerm term{seed, subtract};
  AddMasks(absl::MakeConstSpan(&term, 1), ring_bits, acc);
}

void Keystream(const Key32& key, absl::Span<uint8_t> out) {
  EnsureSodium();
  static const uint8_t kZeroNonce[crypto_stream_chacha20_ietf_NONCEBYTES] = {};
  crypto_stream_chacha20_ietf(out.data(), out.size(), kZeroNonce, key.data());
}

std::vector<uint8_t> Seal(const Key32& key, const Nonce24& nonce, absl::string_view ad,
                          absl::Span<const uint8_t> plaintext) {
  EnsureSodium();
  std::vector<uint8_t> out(plaintext.size() + crypto_aead_xchacha20poly1305_ietf_ABYTES);
  unsigned long long len = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(out.data(), &len, plaintext.data(), plaintext.size(),
                                             reinterpret_cast<const uint8_t*>(ad.data()), ad.size(),
                                             nullptr, nonce.data(), key.data());
  out.resize(len);
  return out;
}

absl::StatusOr<std::vector<uint8_t>> Open(const Key32& key, const Nonce24& nonce,
                                          absl::string_view ad,
                                          absl::Span<const uint8_t> ciphertext) {
  EnsureSodium();
  if (ciphertext.size() < crypto_aead_xchacha20poly1305_ietf_ABYTES) {
    return absl::InvalidArgumentError("secagg: ciphertext too short");
  }
  std::vector<uint8_t> out(ciphertext.size() - crypto_aead_xchacha20poly1305_ietf_ABYTES);
  unsigned long long len = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(
          out.data(), &len, nullptr, ciphertext.data(), ciphertext.size(),
          reinterpret_cast<const uint8_t*>(ad.data()), ad.size(), nonce.data(), key.data()) != 0) {
    return absl::InvalidArgumentError(
        "secagg: share ciphertext failed authentication (wrong key, sender or recipient)");
  }
  out.resize(len);
  return out;
}

}  // namespace sextant::secagg_internal
