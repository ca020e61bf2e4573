#include "orchestrator/core/failure_policy.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

// Adds trial book.size() + 1, ended in `state` at `finished_at` with `error`.
void End(TrialBook& book, v1::TrialState state, double finished_at, const std::string& error = "") {
  TrialEntry e;
  e.row.id = book.size() + 1;
  e.row.state = state;
  e.row.finished_at = finished_at;
  e.row.error = error;
  book.Add(std::move(e));
}

v1::Search Bounds(int max_failed, int in_a_row) {
  v1::Search search;
  search.set_max_trials(100);
  search.set_max_failed_trials(max_failed);
  search.set_max_failed_in_a_row(in_a_row);
  return search;
}

// The same error in a row ends the run at search.max_failed_in_a_row, quoting the latest;
// a success between them starts the count again.
TEST(FailurePolicyTest, TheSameErrorInARowEndsTheRunAndASuccessResetsTheCount) {
  TrialBook book;
  End(book, v1::FAILED, 1, "boom");
  End(book, v1::FAILED, 2, "boom");
  End(book, v1::COMPLETED, 3);
  End(book, v1::FAILED, 4, "boom");
  End(book, v1::FAILED, 5, "boom");
  EXPECT_EQ(FailureBoundsPassed(book, Bounds(10, 3), 0), std::nullopt);
  End(book, v1::FAILED, 6, "boom");
  const std::optional<std::string> why = FailureBoundsPassed(book, Bounds(10, 3), 0);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("3 trials in a row failed with the same error: \"boom\" (trial 6)"));
  EXPECT_THAT(*why, HasSubstr("search.max_failed_in_a_row: 3"));
}

// Different errors count against search.max_failed_trials, and only the trials that ended in
// this session: a resumed run, its cause fixed, goes on.
TEST(FailurePolicyTest, FailuresAddUpFromThisSessionOnly) {
  TrialBook book;
  End(book, v1::FAILED, 1, "old");
  End(book, v1::FAILED, 2, "older");
  End(book, v1::FAILED, 11, "a");
  End(book, v1::COMPLETED, 12);
  End(book, v1::FAILED, 13, "b");
  EXPECT_EQ(FailureBoundsPassed(book, Bounds(3, 5), /*session_started=*/10), std::nullopt);
  const std::optional<std::string> all = FailureBoundsPassed(book, Bounds(3, 5), 0);
  ASSERT_TRUE(all.has_value());
  EXPECT_THAT(*all, HasSubstr("4 trials failed (search.max_failed_trials: 3)"));
  EXPECT_THAT(*all, HasSubstr("the last error: \"b\" (trial 5)"));
}

// A finished run fails when every trial that ended failed; one completed or pruned trial is
// enough to let it end well.
TEST(FailurePolicyTest, EveryTrialFailedOnlyWhenNoneCompletedOrWasPruned) {
  TrialBook book;
  EXPECT_EQ(EveryTrialFailed(book), std::nullopt);
  End(book, v1::FAILED, 1, "first");
  End(book, v1::FAILED, 3, "last");
  End(book, v1::FAILED, 2, "middle");
  const std::optional<std::string> why = EveryTrialFailed(book);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("every trial failed (3 of 3); the last error: \"last\" (trial 2)"));
  End(book, v1::PRUNED, 4);
  EXPECT_EQ(EveryTrialFailed(book), std::nullopt);
}

// The defaults: max(5, ceil(max_trials / 5)) failures, 5 in a row.
TEST(FailurePolicyTest, DefaultBounds) {
  v1::Search search;
  search.set_max_trials(12);
  EXPECT_EQ(MaxFailedTrials(search), 5);
  search.set_max_trials(101);
  EXPECT_EQ(MaxFailedTrials(search), 21);
  EXPECT_EQ(MaxFailedInARow(search), 5);
}

}  // namespace
}  // namespace sextant
