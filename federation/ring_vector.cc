#include "federation/ring_vector.h"

#include <algorithm>
#include <cstring>

#include "common/mapped_floats.h"
#include "federation/internal/secagg_context.h"
#include "federation/internal/secagg_crypto.h"

namespace sextant {
namespace {

template <typename Word>
void AddWords(absl::Span<const uint64_t> values, bool subtract, uint64_t ring, Word* out) {
  if (subtract) {
    for (size_t i = 0; i < values.size(); ++i) out[i] = (out[i] - values[i]) & ring;
  } else {
    for (size_t i = 0; i < values.size(); ++i) out[i] = (out[i] + values[i]) & ring;
  }
}

template <typename Word>
void ReleaseWords(std::vector<Word>& words, size_t offset, size_t count) {
  if (offset >= words.size()) return;
  count = std::min(count, words.size() - offset);
  ReleasePages(words.data() + offset, count * sizeof(Word));
}

}  // namespace

RingVector::RingVector(int ring_bits, size_t size) : ring_bits_(std::clamp(ring_bits, 1, 64)) {
  if (ring_bits_ <= 32) {
    narrow_.assign(size, 0);
  } else {
    wide_.assign(size, 0);
  }
}

RingVector RingVector::FromWords(int ring_bits, absl::Span<const uint64_t> values) {
  RingVector v(ring_bits, values.size());
  v.Add(0, values);
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

std::vector<uint64_t> RingVector::ToWords() const {
  std::vector<uint64_t> out(size());
  Read(0, absl::MakeSpan(out));
  return out;
}

void RingVector::Read(size_t offset, absl::Span<uint64_t> out) const {
  if (ring_bits_ <= 32) {
    std::copy_n(narrow_.begin() + offset, out.size(), out.begin());
  } else {
    std::copy_n(wide_.begin() + offset, out.size(), out.begin());
  }
}

void RingVector::Add(size_t offset, absl::Span<const uint64_t> values, bool subtract) {
  const uint64_t ring = secagg_internal::RingMask(ring_bits_);
  if (ring_bits_ <= 32) {
    AddWords(values, subtract, ring, narrow_.data() + offset);
  } else {
    AddWords(values, subtract, ring, wide_.data() + offset);
  }
}

void RingVector::AddMasks(absl::Span<const secagg_internal::MaskTerm> terms) {
  const uint64_t ring = secagg_internal::RingMask(ring_bits_);
  if (ring_bits_ <= 32) {
    secagg_internal::AddMasks(terms, ring_bits_, absl::MakeSpan(narrow_));
    for (uint32_t& w : narrow_) w &= static_cast<uint32_t>(ring);
  } else {
    secagg_internal::AddMasks(terms, ring_bits_, absl::MakeSpan(wide_));
    for (uint64_t& w : wide_) w &= ring;
  }
}

void RingVector::Release(size_t offset, size_t count) {
  ReleaseWords(narrow_, offset, count);
  ReleaseWords(wide_, offset, count);
}

void RingVector::Zero() {
  std::fill(narrow_.begin(), narrow_.end(), 0);
  std::fill(wide_.begin(), wide_.end(), 0);
}

void RingVector::Clear() {
  narrow_ = {};
  wide_ = {};
}

}  // namespace sextant
