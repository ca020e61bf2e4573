#ifndef SEXTANT_FEDERATION_INTERNAL_RING_PACKING_H_
#define SEXTANT_FEDERATION_INTERNAL_RING_PACKING_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"

namespace sextant::secagg_internal {

// Elements of Z_{2^bits} (bits in 1..64) packed at `bits` bits each, least significant bit
// first, element 0 at bit 0 of byte 0: the layout of masked vectors on the wire and of
// RingVector's memory. n elements take PackedBytes(n, bits) bytes; the unused bits of the last
// byte are 0.
inline size_t PackedBytes(size_t n, int bits) { return (n * static_cast<size_t>(bits) + 7) / 8; }

// Writes values (each taken mod 2^bits) into out[0, PackedBytes(values.size(), bits)), whatever
// was there before.
void PackBits(absl::Span<const uint64_t> values, int bits, uint8_t* out);
// Reads out.size() elements from in[0, PackedBytes(out.size(), bits)).
void UnpackBits(const uint8_t* in, int bits, absl::Span<uint64_t> out);

}  // namespace sextant::secagg_internal

#endif  // SEXTANT_FEDERATION_INTERNAL_RING_PACKING_H_
