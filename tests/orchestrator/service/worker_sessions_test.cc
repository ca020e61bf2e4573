#include "orchestrator/service/worker_sessions.h"

#include <cstring>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

// Distinct, predictable bytes per call, so that tests see exactly which secret was handed out.
WorkerSessions::Random Counter() {
  auto n = std::make_shared<uint8_t>(0);
  return [n](uint8_t* out, size_t size) { std::memset(out, ++*n, size); };
}

TEST(WorkerSessionsTest, OnlyTheRegisteringCallerActsAsItsWorker) {
  WorkerSessions sessions(Counter());
  const std::string a = sessions.Open(1, "sextant://worker/-/host-a");
  const std::string b = sessions.Open(2, "sextant://worker/-/host-b");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(sessions.Check(1, a, "sextant://worker/-/host-a").ok());
  // Another worker's session, a made-up one, none, or the right one from another identity.
  EXPECT_EQ(sessions.Check(1, b, "sextant://worker/-/host-b").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(sessions.Check(1, std::string(64, '0'), "sextant://worker/-/host-a").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(sessions.Check(1, "", "sextant://worker/-/host-a").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(sessions.Check(1, a, "sextant://worker/-/host-b").code(),
            absl::StatusCode::kPermissionDenied);
  absl::Status never = sessions.Check(7, a, "sextant://worker/-/host-a");
  EXPECT_EQ(never.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(never.message(), ::testing::HasSubstr("worker 7 is not registered"));
}

TEST(WorkerSessionsTest, RegistrationsPerIdentityAreCapped) {
  WorkerSessions sessions(Counter());
  for (size_t i = 0; i < kMaxRegistrationsPerIdentity; ++i) {
    ASSERT_TRUE(sessions.CanOpen("sextant://worker/-/a").ok());
    sessions.Open(static_cast<int64_t>(i) + 1, "sextant://worker/-/a");
  }
  EXPECT_EQ(sessions.CanOpen("sextant://worker/-/a").code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(sessions.CanOpen("sextant://worker/-/b").ok());
}

// The cap counts live workers: a session unused for forget_after is forgotten, and its worker
// must register again.
TEST(WorkerSessionsTest, IdleSessionsAreForgottenSoTheCapCountsLiveWorkers) {
  FakeClock clock;
  WorkerSessions sessions(Counter(), &clock, absl::Minutes(10));
  std::string kept;
  for (size_t i = 0; i < kMaxRegistrationsPerIdentity; ++i) {
    const std::string s = sessions.Open(static_cast<int64_t>(i) + 1, "id");
    if (i == 0) kept = s;
  }
  EXPECT_EQ(sessions.CanOpen("id").code(), absl::StatusCode::kResourceExhausted);
  clock.Advance(absl::Minutes(9));
  EXPECT_TRUE(sessions.Check(1, kept, "id").ok());  // worker 1 is alive
  clock.Advance(absl::Minutes(2));
  EXPECT_TRUE(sessions.CanOpen("id").ok());  // the others went quiet 11 minutes ago
  EXPECT_TRUE(sessions.Check(1, kept, "id").ok());
  EXPECT_EQ(sessions.Check(2, kept, "id").code(), absl::StatusCode::kNotFound);
}

TEST(WorkerSessionsTest, TheDefaultRandomnessGivesDistinctSecrets) {
  WorkerSessions sessions;
  EXPECT_NE(sessions.Open(1, ""), sessions.Open(2, ""));
}

}  // namespace
}  // namespace sextant
