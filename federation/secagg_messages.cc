#include "federation/secagg_messages.h"

#include <cstring>

#include "absl/status/status.h"
#include "federation/internal/ring_packing.h"

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
  std::string out(secagg_internal::PackedBytes(values.size(), bits), '\0');
  secagg_internal::PackBits(values, bits, reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

absl::StatusOr<std::vector<uint64_t>> UnpackRingVector(absl::string_view packed, int bits,
                                                       size_t count) {
  std::vector<uint64_t> out(count);
  if (absl::Status s = UnpackRingVectorInto(packed, bits, absl::MakeSpan(out)); !s.ok()) return s;
  return out;
}

absl::Status UnpackRingVectorInto(absl::string_view packed, int bits, absl::Span<uint64_t> out) {
  if (bits < 1 || bits > 64 || packed.size() != secagg_internal::PackedBytes(out.size(), bits)) {
    return absl::InvalidArgumentError("secagg: packed vector has the wrong size");
  }
  secagg_internal::UnpackBits(reinterpret_cast<const uint8_t*>(packed.data()), bits, out);
  return absl::OkStatus();
}

}  // namespace sextant
