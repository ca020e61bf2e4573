#include "rpc/call_quota.h"

#include <optional>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

PeerIdentity Client(const std::string& name) { return {Role::kClient, "east", name}; }

// One identity takes at most its share; the others keep theirs, and a released ticket gives
// its place back.
TEST(CallQuotaTest, OneIdentityCannotTakeTheOthersPlaces) {
  CallQuota quota(CallLimits{/*max_calls=*/10, /*per_identity=*/3});
  std::vector<CallQuota::Ticket> alice;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<CallQuota::Ticket> t = quota.Admit(Client("alice"));
    ASSERT_TRUE(t.ok()) << t.status();
    alice.push_back(*std::move(t));
  }
  absl::StatusOr<CallQuota::Ticket> fourth = quota.Admit(Client("alice"));
  EXPECT_TRUE(absl::IsResourceExhausted(fourth.status()));
  EXPECT_THAT(fourth.status().message(), HasSubstr("sextant://client/east/alice"));
  EXPECT_THAT(fourth.status().message(), HasSubstr("at most 3 per identity"));
  EXPECT_TRUE(quota.Admit(Client("bob")).ok());
  EXPECT_EQ(quota.active(), 3);  // bob's ticket went with the temporary
  alice.pop_back();
  EXPECT_EQ(quota.active(), 2);
  EXPECT_TRUE(quota.Admit(Client("alice")).ok());
  EXPECT_EQ(quota.refused(), 1);
}

// The bound in all holds for callers with and without a certificate identity alike.
TEST(CallQuotaTest, TheBoundInAllCoversEveryCaller) {
  CallQuota quota(CallLimits{/*max_calls=*/2, /*per_identity=*/5});
  absl::StatusOr<CallQuota::Ticket> a = quota.Admit(std::nullopt);
  absl::StatusOr<CallQuota::Ticket> b = quota.Admit(Client("alice"));
  ASSERT_TRUE(a.ok() && b.ok());
  absl::StatusOr<CallQuota::Ticket> c = quota.Admit(std::nullopt);
  EXPECT_TRUE(absl::IsResourceExhausted(c.status()));
  EXPECT_THAT(c.status().message(), HasSubstr("at most 2 calls at once"));
  EXPECT_TRUE(absl::IsResourceExhausted(quota.Admit(Client("bob")).status()));
  // A moved ticket is released once.
  CallQuota::Ticket moved = *std::move(a);
  moved = CallQuota::Ticket();
  EXPECT_EQ(quota.active(), 1);
  EXPECT_TRUE(quota.Admit(Client("bob")).ok());
}

// What waiting calls keep is bounded in all, and given back with each call's place.
TEST(CallQuotaTest, BytesKeptByWaitingCallsAreBoundedInAll) {
  CallQuota quota(CallLimits{/*max_calls=*/10, /*per_identity=*/5, /*max_held_bytes=*/100});
  absl::StatusOr<CallQuota::Ticket> a = quota.Admit(Client("alice"));
  absl::StatusOr<CallQuota::Ticket> b = quota.Admit(Client("bob"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->Hold(60).ok());
  absl::Status over = b->Hold(50);
  EXPECT_TRUE(absl::IsResourceExhausted(over));
  EXPECT_THAT(over.message(), HasSubstr("keep 60 bytes; at most 100 in all"));
  EXPECT_TRUE(b->Hold(40).ok());
  EXPECT_EQ(quota.held(), 100);
  *a = CallQuota::Ticket();  // alice's call ends
  EXPECT_EQ(quota.held(), 40);
  EXPECT_TRUE(b->Hold(50).ok());
}

}  // namespace
}  // namespace sextant
