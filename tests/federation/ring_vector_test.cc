#include "federation/ring_vector.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "federation/internal/secagg_crypto.h"
#include "federation/secagg_messages.h"
#include "federation/secure_quantizer.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

uint64_t Mask(int bits) { return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }

std::vector<uint64_t> Words(size_t n, uint64_t seed) {
  std::vector<uint64_t> v(n);
  for (uint64_t& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = seed ^ (seed >> 29);
  }
  return v;
}

class RingVectorTest : public ::testing::TestWithParam<int> {};

TEST_P(RingVectorTest, AddsAndSubtractsModuloTheRing) {
  const int bits = GetParam();
  const std::vector<uint64_t> a = Words(1000, 1), b = Words(1000, 2);
  RingVector v = RingVector::FromWords(bits, a);
  EXPECT_EQ(v.ring_bits(), bits);
  ASSERT_EQ(v.size(), a.size());
  v.Add(10, absl::MakeConstSpan(b).subspan(10, 500));
  for (size_t i = 0; i < a.size(); ++i) {
    const uint64_t want = (a[i] + (i >= 10 && i < 510 ? b[i] : 0)) & Mask(bits);
    ASSERT_EQ(v[i], want) << i;
  }
  v.Add(10, absl::MakeConstSpan(b).subspan(10, 500), /*subtract=*/true);
  EXPECT_EQ(v, RingVector::FromWords(bits, a));
  // Write sets elements whatever they held.
  v.Write(3, absl::MakeConstSpan(b).subspan(3, 20));
  for (size_t i = 0; i < 30; ++i) {
    ASSERT_EQ(v[i], (i >= 3 && i < 23 ? b[i] : a[i]) & Mask(bits)) << i;
  }
  std::vector<uint64_t> part(7);
  v.Read(993, absl::MakeSpan(part));
  for (size_t j = 0; j < part.size(); ++j) EXPECT_EQ(part[j], a[993 + j] & Mask(bits));
}

// Clients mask their inputs in 64-bit words; the server adds masks to its packed sum a block at
// a time. Both must give the same elements mod 2^bits.
TEST_P(RingVectorTest, MasksAddedInItsWordsEqualMasksAddedInSixtyFourBitWords) {
  const int bits = GetParam();
  secagg_internal::Key32 k1{}, k2{};
  k1[0] = 7;
  k2[5] = 9;
  const std::vector<secagg_internal::MaskTerm> terms = {{k1, false}, {k2, true}};
  const std::vector<uint64_t> start = Words(200003, 3);  // several blocks, the last one short
  std::vector<uint64_t> wide = start;
  secagg_internal::AddMasks(terms, bits, absl::MakeSpan(wide));
  RingVector v = RingVector::FromWords(bits, start);
  v.AddMasks(terms);
  for (size_t i = 0; i < wide.size(); ++i) ASSERT_EQ(v[i], wide[i] & Mask(bits)) << i;
}

TEST_P(RingVectorTest, ItsBytesReadBackAsTheSameElements) {
  const int bits = GetParam();
  RingVector v = RingVector::FromWords(bits, Words(99, 4));
  const std::vector<uint64_t> words = v.ToWords();
  std::vector<char> bytes(words.size() * RingVector::WordBytes(bits));
  EXPECT_EQ(RingVector::WordBytes(bits), bits <= 32 ? 4u : 8u);
  RingVector::ToBytes(bits, words, bytes.data());
  std::vector<uint64_t> back(words.size());
  RingVector::FromBytes(bits, bytes.data(), absl::MakeSpan(back));
  EXPECT_EQ(back, words);
}

// A block reads and writes whole bytes: every way an element can straddle them.
TEST_P(RingVectorTest, ChangesAtAnyOffsetTouchOnlyTheirElements) {
  const int bits = GetParam();
  const std::vector<uint64_t> a = Words(77, 5);
  for (size_t offset : {0, 1, 7, 8, 9, 30, 69, 76}) {
    for (size_t count : {0, 1, 2, 7, 8, 9}) {
      if (offset + count > a.size()) continue;
      RingVector v = RingVector::FromWords(bits, a);
      const std::vector<uint64_t> ones(count, 1);
      v.Add(offset, ones);
      for (size_t i = 0; i < a.size(); ++i) {
        const bool inside = i >= offset && i < offset + count;
        ASSERT_EQ(v[i], (a[i] + (inside ? 1 : 0)) & Mask(bits))
            << "offset " << offset << " count " << count << " element " << i;
      }
    }
  }
}

TEST_P(RingVectorTest, TakesItsRingsWidthAnElementAndReadsAsTheWireDoes) {
  const int bits = GetParam();
  const std::vector<uint64_t> a = Words(1000, 6);
  RingVector v = RingVector::FromWords(bits, a);
  EXPECT_EQ(v.packed_bytes(), (1000 * static_cast<size_t>(bits) + 7) / 8);
  // The wire packs the same elements the same way.
  std::vector<uint64_t> reduced = a;
  for (uint64_t& x : reduced) x &= Mask(bits);
  absl::StatusOr<std::vector<uint64_t>> back =
      UnpackRingVector(PackRingVector(reduced, bits), bits, a.size());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, reduced);
  EXPECT_EQ(v.ToWords(), reduced);
}

INSTANTIATE_TEST_SUITE_P(Rings, RingVectorTest, ::testing::Values(1, 7, 20, 32, 33, 63, 64));

TEST(RingVectorDecodeTest, ConsumingTheSumDecodesTheSameMeanAsReadingIt) {
  SecureQuantizerOptions o;
  o.max_clients = 3;
  o.max_weight = 5;
  absl::StatusOr<SecureQuantizer> q = SecureQuantizer::Create(o);
  ASSERT_TRUE(q.ok()) << q.status();
  const size_t n = 200000;  // several decode chunks
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>((i % 201) / 100.0 - 1.0);
  std::vector<uint64_t> encoded(n + 1);
  ASSERT_TRUE(q->Encode(x, 4, 17, absl::MakeSpan(encoded)).ok());
  RingVector sum = RingVector::FromWords(q->ring_bits(), encoded);
  std::vector<float> read(n), consumed(n);
  ASSERT_EQ(*q->DecodeMean(sum, absl::MakeSpan(read)), 4);
  ASSERT_EQ(*q->ConsumeMean(std::move(sum), absl::MakeSpan(consumed)), 4);
  EXPECT_EQ(read, consumed);
  for (size_t i = 0; i < n; i += 997) EXPECT_NEAR(read[i], x[i], q->max_error()) << i;
  // Encoded straight into a RingVector, block by block: the same elements as into 64-bit words.
  absl::StatusOr<RingVector> direct = q->Encode(x, 4, 17);
  ASSERT_TRUE(direct.ok()) << direct.status();
  EXPECT_EQ(direct->ring_bits(), q->ring_bits());
  EXPECT_EQ(direct->ToWords(), encoded);
  x[n - 3] = std::nanf("");
  EXPECT_EQ(q->Encode(x, 4, 17).status().code(), absl::StatusCode::kInvalidArgument);
  // A sum in another ring is refused, naming both.
  RingVector other = RingVector::FromWords(q->ring_bits() + 1, encoded);
  absl::StatusOr<int64_t> refused = q->DecodeMean(other, absl::MakeSpan(read));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("-bit ring"), std::string::npos) << refused.status();
}

}  // namespace
}  // namespace sextant
