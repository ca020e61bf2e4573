// RetryWhileUnreachable on a FakeClock: an answer that is not "unreachable" ends the retries at
// once, unreachable answers are asked again after each pause until the bound counted from the
// first of them, and `between` may stop the loop.
#include "common/retry.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(RetryTest, AnAnswerThatIsNotUnreachableIsReturnedAtOnce) {
  FakeClock clock;
  int calls = 0;
  absl::StatusOr<int> r = RetryWhileUnreachable<int>(&clock, RetryPolicy{}, [&] {
    ++calls;
    return absl::StatusOr<int>(absl::PermissionDeniedError("no"));
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(absl::IsPermissionDenied(r.status()));
}

TEST(RetryTest, UnreachableAnswersAreAskedAgainUntilThePeerAnswers) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  int calls = 0;
  absl::StatusOr<int> r = RetryWhileUnreachable<int>(
      &clock, RetryPolicy{absl::Seconds(60), absl::Seconds(1)}, [&]() -> absl::StatusOr<int> {
        if (++calls <= 3) {
          return calls % 2 ? absl::UnavailableError("starting") : absl::DeadlineExceededError("");
        }
        return 7;
      });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 7);
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(clock.Now() - start, absl::Seconds(3));  // three pauses
}

TEST(RetryTest, GivesUpAfterTheBoundCountedFromTheFirstUnreachableAnswer) {
  FakeClock clock;
  int calls = 0;
  std::vector<std::string> told;
  absl::StatusOr<int> r = RetryWhileUnreachable<int>(
      &clock, RetryPolicy{absl::Seconds(10), absl::Seconds(1)},
      [&]() -> absl::StatusOr<int> {
        // The first try long-polls 100 s before it fails: the bound starts after it.
        if (++calls == 1) clock.Advance(absl::Seconds(100));
        return absl::UnavailableError("connection refused");
      },
      [&](const absl::Status& why) {
        told.push_back(std::string(why.message()));
        return absl::OkStatus();
      });
  EXPECT_TRUE(absl::IsUnavailable(r.status()));
  EXPECT_EQ(r.status().message(), "connection refused");
  EXPECT_EQ(calls, 12);  // at 0, 1, ..., 11 s after the first failure
  EXPECT_EQ(told.size(), 11u);
}

TEST(RetryTest, BetweenStopsTheRetriesWithItsStatus) {
  FakeClock clock;
  int calls = 0;
  absl::StatusOr<int> r = RetryWhileUnreachable<int>(
      &clock, RetryPolicy{},
      [&]() -> absl::StatusOr<int> {
        ++calls;
        return absl::UnavailableError("down");
      },
      [&](const absl::Status&) {
        return calls == 2 ? absl::CancelledError("stopped") : absl::OkStatus();
      });
  EXPECT_TRUE(absl::IsCancelled(r.status()));
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace sextant
