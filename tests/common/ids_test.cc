// HashId: FNV-1a (64-bit), the published test vectors, so that every build and host derives the
// same seeds from the same ids.
#include "common/ids.h"

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(HashIdTest, IsFnv1aOnThePublishedVectors) {
  EXPECT_EQ(HashId(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(HashId("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(HashId("foobar"), 0x85944171f73967e8ull);
  EXPECT_NE(HashId("east/0"), HashId("east/1"));
}

}  // namespace
}  // namespace sextant
