#include "federation/secagg_messages.h"

#include <cstring>

#include "absl/status/status.h"

namespace sextant {

absl::string_view SecAggStageName(SecAggStage stage) {
  switch (stage) {
    case SecAggStage::kAdvertiseKeys:
      return "advertise_keys";
    case SecAggStage::kShareKeys:
      return "share_keys";
    case SecAggStage::kMaskedInput:
      return "masked_input";
    case SecAggStage::kUnmask:
      return "unmask";
    case SecAggStage::kDone:
      return "done";
    case SecAggStage::kAborted:
      return "aborted";
  }
  return "unknown";
}

namespace {
constexpr size_t kShareBytes(const SecAggEncryptedShare& s) {
  return 4 + 4 + s.nonce.size() + 4 + s.ciphertext.size();
}
}  // namespace

size_t WireSize(const SecAggHeader& m) { return 4 + m.experiment_id.size() + 8 + 4 + 4 + 4; }
size_t WireSize(const SecAggAdvertiseKeys& m) { return WireSize(m.header) + 96; }
size_t WireSize(const SecAggKeyDirectory& m) {
  return WireSize(m.header) + 4 + m.peers.size() * (4 + 64);
}
size_t WireSize(const SecAggShareKeys& m) {
  size_t s = WireSize(m.header) + 4;
  for (const auto& share : m.shares) s += kShareBytes(share);
  return s;
}
size_t WireSize(const SecAggShareDelivery& m) {
  size_t s = WireSize(m.header) + 4;
  for (const auto& share : m.shares) s += kShareBytes(share);
  return s;
}
size_t WireSize(const SecAggMaskedInput& m, int ring_bits) {
  return WireSize(m.header) + 4 + (m.values.size() * ring_bits + 7) / 8;
}
size_t WireSize(const SecAggUnmaskRequest& m) {
  return WireSize(m.header) + 8 + 4 * (m.survivors.size() + m.dropped.size());
}
size_t WireSize(const SecAggUnmaskResponse& m) {
  return WireSize(m.header) + 4 + m.shares.size() * (4 + 4 + 5 * 8);
}

std::string PackRingVector(absl::Span<const uint64_t> values, int bits) {
  if (bits == 32) {  // the common ring: whole little-endian words, no bit shuffling
    std::string out(values.size() * 4, '\0');
    auto* p = reinterpret_cast<uint8_t*>(out.data());
    for (size_t k = 0; k < values.size(); ++k) {
      const uint32_t v = static_cast<uint32_t>(values[k]);
      for (int i = 0; i < 4; ++i) p[4 * k + i] = static_cast<uint8_t>(v >> (8 * i));
    }
    return out;
  }
  std::string out((values.size() * bits + 7) / 8 + 8, '\0');  // 8 spare bytes for wide stores
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  size_t bit = 0;
  for (uint64_t v : values) {
    v &= mask;
    const size_t byte = bit / 8, shift = bit % 8;
    unsigned __int128 w = static_cast<unsigned __int128>(v) << shift;
    for (size_t i = 0; i * 8 < shift + bits; ++i) p[byte + i] |= static_cast<uint8_t>(w >> (8 * i));
    bit += bits;
  }
  out.resize((values.size() * bits + 7) / 8);
  return out;
}

absl::StatusOr<std::vector<uint64_t>> UnpackRingVector(absl::string_view packed, int bits,
                                                       size_t count) {
  std::vector<uint64_t> out(count);
  if (absl::Status s = UnpackRingVectorInto(packed, bits, absl::MakeSpan(out)); !s.ok()) return s;
  return out;
}

absl::Status UnpackRingVectorInto(absl::string_view packed, int bits, absl::Span<uint64_t> out) {
  const size_t count = out.size();
  if (bits < 1 || bits > 64 || packed.size() != (count * bits + 7) / 8) {
    return absl::InvalidArgumentError("secagg: packed vector has the wrong size");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(packed.data());
  if (bits == 32) {
    for (size_t k = 0; k < count; ++k) {
      out[k] = uint64_t{p[4 * k]} | uint64_t{p[4 * k + 1]} << 8 | uint64_t{p[4 * k + 2]} << 16 |
               uint64_t{p[4 * k + 3]} << 24;
    }
    return absl::OkStatus();
  }
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  size_t bit = 0;
  for (size_t k = 0; k < count; ++k) {
    const size_t byte = bit / 8, shift = bit % 8;
    unsigned __int128 w = 0;
    for (size_t i = 0; i * 8 < shift + bits; ++i) {
      w |= static_cast<unsigned __int128>(p[byte + i]) << (8 * i);
    }
    out[k] = static_cast<uint64_t>(w >> shift) & mask;
    bit += bits;
  }
  return absl::OkStatus();
}

}  // namespace sextant
