#include "federation/ring_vector.h"

#include <algorithm>
#include <cstring>

#include "common/mapped_floats.h"
#include "federation/internal/ring_packing.h"
#include "federation/internal/secagg_context.h"
#include "federation/internal/secagg_crypto.h"

namespace sextant {
namespace {

// Elements are unpacked this many at a time: a multiple of 8 (so that a block starts on a byte)
// and of the masks' keystream chunk (so that a block's masks can be made on their own).
constexpr size_t kBlock = 16 * secagg_internal::kMaskChunkElements;
static_assert(kBlock % 8 == 0);

// Rings of whole words are added in place, word by word: the sum's hot path when a client's
// masked input arrives (a loop the compiler vectorises).
template <typename Word>
void AddWords(uint8_t* bytes, absl::Span<const uint64_t> values, bool subtract) {
  for (size_t i = 0; i < values.size(); ++i) {
    Word w;
    std::memcpy(&w, bytes + sizeof(Word) * i, sizeof(Word));
    w = subtract ? w - static_cast<Word>(values[i]) : w + static_cast<Word>(values[i]);
    std::memcpy(bytes + sizeof(Word) * i, &w, sizeof(Word));
  }
}

}  // namespace

RingVector::RingVector(int ring_bits, size_t size)
    : ring_bits_(std::clamp(ring_bits, 1, 64)),
      size_(size),
      bytes_(secagg_internal::PackedBytes(size, ring_bits_), 0) {}

RingVector RingVector::FromWords(int ring_bits, absl::Span<const uint64_t> values) {
  RingVector v(ring_bits, values.size());
  secagg_internal::PackBits(values, v.ring_bits_, v.bytes_.data());
  return v;
}

void RingVector::ToBytes(int ring_bits, absl::Span<const uint64_t> values, char* out) {
  if (WordBytes(ring_bits) == 8) {
    std::memcpy(out, values.data(), values.size() * 8);
    return;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t w = static_cast<uint32_t>(values[i]);
    std::memcpy(out + 4 * i, &w, 4);
  }
}

void RingVector::FromBytes(int ring_bits, const char* in, absl::Span<uint64_t> out) {
  if (WordBytes(ring_bits) == 8) {
    std::memcpy(out.data(), in, out.size() * 8);
    return;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t w;
    std::memcpy(&w, in + 4 * i, 4);
    out[i] = w;
  }
}

uint64_t RingVector::operator[](size_t i) const {
  uint64_t v = 0;
  Read(i, absl::MakeSpan(&v, 1));
  return v;
}

std::vector<uint64_t> RingVector::ToWords() const {
  std::vector<uint64_t> out(size_);
  Read(0, absl::MakeSpan(out));
  return out;
}

void RingVector::Read(size_t offset, absl::Span<uint64_t> out) const {
  // From the byte holding element `offset`'s first bit, skipping the elements before it there.
  const size_t aligned = offset / 8 * 8;
  const uint8_t* from = bytes_.data() + aligned / 8 * static_cast<size_t>(ring_bits_);
  const size_t skip = offset - aligned;
  if (skip == 0) {
    secagg_internal::UnpackBits(from, ring_bits_, out);
    return;
  }
  std::vector<uint64_t> words(skip + out.size());
  secagg_internal::UnpackBits(from, ring_bits_, absl::MakeSpan(words));
  std::copy(words.begin() + skip, words.end(), out.begin());
}

template <typename Change>
void RingVector::Modify(size_t begin, size_t end, Change change) {
  std::vector<uint64_t> words(std::min(kBlock, end - begin + 8));
  for (size_t at = begin / 8 * 8; at < end; at += words.size() / 8 * 8) {
    // Whole bytes: from a multiple of 8 elements to one (or to the end of the vector).
    const size_t stop = std::min({at + words.size() / 8 * 8, (end + 7) / 8 * 8, size_});
    const absl::Span<uint64_t> block = absl::MakeSpan(words).first(stop - at);
    uint8_t* bytes = bytes_.data() + at / 8 * static_cast<size_t>(ring_bits_);
    secagg_internal::UnpackBits(bytes, ring_bits_, block);
    change(at, block);
    secagg_internal::PackBits(block, ring_bits_, bytes);
  }
}

void RingVector::Add(size_t offset, absl::Span<const uint64_t> values, bool subtract) {
  if (ring_bits_ == 32) return AddWords<uint32_t>(bytes_.data() + 4 * offset, values, subtract);
  if (ring_bits_ == 64) return AddWords<uint64_t>(bytes_.data() + 8 * offset, values, subtract);
  const size_t end = offset + values.size();
  Modify(offset, end, [&](size_t first, absl::Span<uint64_t> block) {
    // Only the block's elements inside [offset, end) change.
    const size_t lo = std::max(first, offset), hi = std::min(first + block.size(), end);
    for (size_t i = lo; i < hi; ++i) {
      uint64_t& w = block[i - first];
      w = subtract ? w - values[i - offset] : w + values[i - offset];
    }
  });
}

void RingVector::Write(size_t offset, absl::Span<const uint64_t> values) {
  const size_t end = offset + values.size();
  Modify(offset, end, [&](size_t first, absl::Span<uint64_t> block) {
    const size_t lo = std::max(first, offset), hi = std::min(first + block.size(), end);
    std::copy(values.begin() + (lo - offset), values.begin() + (hi - offset),
              block.begin() + (lo - first));
  });
}

void RingVector::AddMasks(absl::Span<const secagg_internal::MaskTerm> terms) {
  Modify(0, size_, [&](size_t first, absl::Span<uint64_t> block) {
    secagg_internal::AddMasks(terms, ring_bits_, block, first);
  });
}

void RingVector::Release(size_t offset, size_t count) {
  if (offset >= size_) return;
  count = std::min(count, size_ - offset);
  // The bytes that hold only these elements' bits.
  const size_t bits = static_cast<size_t>(ring_bits_);
  const size_t first = (offset * bits + 7) / 8, last = (offset + count) * bits / 8;
  if (last > first) ReleasePages(bytes_.data() + first, last - first);
}

void RingVector::Zero() { std::fill(bytes_.begin(), bytes_.end(), 0); }

void RingVector::Clear() {
  bytes_ = {};
  size_ = 0;
}

}  // namespace sextant
