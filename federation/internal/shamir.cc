#include "federation/internal/shamir.h"

#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"

namespace sextant::secagg_internal {
namespace {

constexpr int kChunkBytes[kShareElements] = {7, 7, 7, 7, 4};

uint64_t Reduce(unsigned __int128 v) {
  // 2^61 = 1 (mod p): fold the high bits onto the low ones.
  uint64_t lo = static_cast<uint64_t>(v) & kShamirPrime;
  uint64_t hi = static_cast<uint64_t>(v >> 61);
  uint64_t r = lo + hi;
  r = (r & kShamirPrime) + (r >> 61);
  return r >= kShamirPrime ? r - kShamirPrime : r;
}
uint64_t Add(uint64_t a, uint64_t b) {
  uint64_t r = a + b;
  return r >= kShamirPrime ? r - kShamirPrime : r;
}
uint64_t Sub(uint64_t a, uint64_t b) { return a >= b ? a - b : a + kShamirPrime - b; }
uint64_t Mul(uint64_t a, uint64_t b) { return Reduce(static_cast<unsigned __int128>(a) * b); }
uint64_t Inverse(uint64_t a) {
  uint64_t result = 1, base = a, e = kShamirPrime - 2;
  while (e) {
    if (e & 1) result = Mul(result, base);
    base = Mul(base, base);
    e >>= 1;
  }
  return result;
}
uint64_t RandomElement(ChaChaDrbg& rng) {
  for (;;) {
    uint64_t v = rng.NextU64() & kShamirPrime;  // 61 bits; reject the one value >= p
    if (v < kShamirPrime) return v;
  }
}

}  // namespace

std::vector<FieldShare> ShamirSplit(const Key32& secret, int threshold,
                                    absl::Span<const uint32_t> xs, ChaChaDrbg& rng) {
  std::vector<FieldShare> shares(xs.size());
  size_t offset = 0;
  for (int e = 0; e < kShareElements; ++e) {
    uint64_t chunk = 0;
    std::memcpy(&chunk, secret.data() + offset, kChunkBytes[e]);
    offset += kChunkBytes[e];
    std::vector<uint64_t> coeffs(threshold);
    coeffs[0] = chunk;
    for (int c = 1; c < threshold; ++c) coeffs[c] = RandomElement(rng);
    for (size_t h = 0; h < xs.size(); ++h) {
      uint64_t y = 0;  // Horner
      for (int c = threshold - 1; c >= 0; --c) y = Add(Mul(y, xs[h]), coeffs[c]);
      shares[h][e] = y;
    }
  }
  return shares;
}

absl::StatusOr<Key32> ShamirReconstruct(absl::Span<const std::pair<uint32_t, FieldShare>> shares,
                                        int threshold) {
  if (threshold < 1 || shares.size() < static_cast<size_t>(threshold)) {
    return absl::InvalidArgumentError("shamir: fewer shares than the threshold");
  }
  absl::flat_hash_set<uint32_t> seen;
  for (int i = 0; i < threshold; ++i) {
    if (shares[i].first == 0 || !seen.insert(shares[i].first).second) {
      return absl::InvalidArgumentError("shamir: zero or repeated share index");
    }
    for (uint64_t v : shares[i].second) {
      if (v >= kShamirPrime) return absl::InvalidArgumentError("shamir: element outside field");
    }
  }
  // Lagrange coefficients at 0: l_i = prod_{j != i} x_j / (x_j - x_i).
  std::vector<uint64_t> lagrange(threshold);
  for (int i = 0; i < threshold; ++i) {
    uint64_t num = 1, den = 1;
    for (int j = 0; j < threshold; ++j) {
      if (j == i) continue;
      num = Mul(num, shares[j].first);
      den = Mul(den, Sub(shares[j].first, shares[i].first));
    }
    lagrange[i] = Mul(num, Inverse(den));
  }
  Key32 secret{};
  size_t offset = 0;
  for (int e = 0; e < kShareElements; ++e) {
    uint64_t v = 0;
    for (int i = 0; i < threshold; ++i) v = Add(v, Mul(lagrange[i], shares[i].second[e]));
    if (v >> (8 * kChunkBytes[e])) {
      return absl::InvalidArgumentError("shamir: shares do not reconstruct a valid secret");
    }
    std::memcpy(secret.data() + offset, &v, kChunkBytes[e]);
    offset += kChunkBytes[e];
  }
  return secret;
}

}  // namespace sextant::secagg_internal
