#include "federation/internal/ring_packing.h"

#include <bit>
#include <cstring>

namespace sextant::secagg_internal {

static_assert(std::endian::native == std::endian::little,
              "the packed layout is little-endian; a big-endian host needs byte swaps here");

using U128 = unsigned __int128;

// Both loops stream through a 128-bit accumulator and move 8 bytes at a time, so that an
// element costs a shift, an or and a share of one 8-byte load or store.
void PackBits(absl::Span<const uint64_t> values, int bits, uint8_t* out) {
  if (bits == 32) {  // whole words: a loop the compiler vectorises
    for (size_t i = 0; i < values.size(); ++i) {
      const uint32_t w = static_cast<uint32_t>(values[i]);
      std::memcpy(out + 4 * i, &w, 4);
    }
    return;
  }
  if (bits == 64) {
    std::memcpy(out, values.data(), values.size() * 8);
    return;
  }
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  U128 acc = 0;
  int filled = 0;
  for (uint64_t v : values) {
    acc |= static_cast<U128>(v & mask) << filled;
    filled += bits;
    if (filled >= 64) {
      const uint64_t word = static_cast<uint64_t>(acc);
      std::memcpy(out, &word, 8);
      out += 8;
      acc >>= 64;
      filled -= 64;
    }
  }
  const uint64_t word = static_cast<uint64_t>(acc);
  std::memcpy(out, &word, static_cast<size_t>(filled + 7) / 8);
}

void UnpackBits(const uint8_t* in, int bits, absl::Span<uint64_t> out) {
  if (bits == 32) {
    for (size_t i = 0; i < out.size(); ++i) {
      uint32_t w;
      std::memcpy(&w, in + 4 * i, 4);
      out[i] = w;
    }
    return;
  }
  if (bits == 64) {
    std::memcpy(out.data(), in, out.size() * 8);
    return;
  }
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  size_t left = PackedBytes(out.size(), bits);
  U128 acc = 0;
  int filled = 0;
  for (uint64_t& v : out) {
    if (filled < bits) {
      uint64_t word = 0;
      const size_t take = left < 8 ? left : 8;
      std::memcpy(&word, in, take);
      in += take;
      left -= take;
      acc |= static_cast<U128>(word) << filled;
      filled += static_cast<int>(8 * take);
    }
    v = static_cast<uint64_t>(acc) & mask;
    acc >>= bits;
    filled -= bits;
  }
}

}  // namespace sextant::secagg_internal
