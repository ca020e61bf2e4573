#ifndef SEXTANT_FEDERATION_RING_VECTOR_H_
#define SEXTANT_FEDERATION_RING_VECTOR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace sextant {

namespace secagg_internal {
struct MaskTerm;
}  // namespace secagg_internal

// A vector over Z_{2^ring_bits}, the ring in which secure aggregation adds masked inputs, packed
// at ring_bits bits an element (secagg_internal::PackBits; the wire's layout): a sum in a 33-bit
// ring takes 33/32 of a float model's memory, not the 2x of 64-bit words. Elements are read and
// changed a block at a time through 64-bit words. Copyable and movable; not thread-safe.
class RingVector {
 public:
  RingVector() = default;  // empty, ring_bits 0
  // `size` zeros in Z_{2^ring_bits}; ring_bits is clamped into 1..64.
  RingVector(int ring_bits, size_t size);
  // The values reduced mod 2^ring_bits.
  static RingVector FromWords(int ring_bits, absl::Span<const uint64_t> values);
  // Bytes a word of a staged element takes (ToBytes): 4 when ring_bits <= 32, else 8.
  static size_t WordBytes(int ring_bits) { return ring_bits <= 32 ? 4 : 8; }
  // Elements as whole words (WordBytes(ring_bits) bytes each, in the machine's byte order), for
  // staging a vector that arrives in pieces of any length: values into out (values.size() words;
  // values must be reduced), and back.
  static void ToBytes(int ring_bits, absl::Span<const uint64_t> values, char* out);
  static void FromBytes(int ring_bits, const char* in, absl::Span<uint64_t> out);

  int ring_bits() const { return ring_bits_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The memory its elements take: ceil(size * ring_bits / 8) bytes.
  size_t packed_bytes() const { return bytes_.size(); }
  uint64_t operator[](size_t i) const;
  std::vector<uint64_t> ToWords() const;

  // Copies elements [offset, offset + out.size()) into out (the range must lie inside).
  void Read(size_t offset, absl::Span<uint64_t> out) const;
  // Adds values (subtract: subtracts them) to elements [offset, offset + values.size()) mod
  // 2^ring_bits (the range must lie inside). Values need not be reduced.
  void Add(size_t offset, absl::Span<const uint64_t> values, bool subtract = false);
  // Sets elements [offset, offset + values.size()) to values mod 2^ring_bits (the range must lie
  // inside).
  void Write(size_t offset, absl::Span<const uint64_t> values);
  // Adds every term's PRG mask (secagg_internal::AddMasks) to the whole vector.
  void AddMasks(absl::Span<const secagg_internal::MaskTerm> terms);
  // Gives the memory of elements [offset, offset + count) back to the system (clamped to the
  // vector; the whole pages inside it): for values no longer needed, which read back as 0 or as
  // they were afterwards.
  void Release(size_t offset, size_t count);
  // Sets every element to 0, keeping the memory.
  void Zero();
  // Frees everything: empty afterwards, ring_bits kept.
  void Clear();

  friend bool operator==(const RingVector& a, const RingVector& b) {
    return a.ring_bits_ == b.ring_bits_ && a.size_ == b.size_ && a.bytes_ == b.bytes_;
  }

 private:
  // Unpacks elements [begin, end) into 64-bit words, hands them to change(first element, words)
  // a block at a time, and packs them back.
  template <typename Change>
  void Modify(size_t begin, size_t end, Change change);

  int ring_bits_ = 0;
  size_t size_ = 0;
  std::vector<uint8_t> bytes_;  // PackedBytes(size_, ring_bits_)
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_RING_VECTOR_H_
