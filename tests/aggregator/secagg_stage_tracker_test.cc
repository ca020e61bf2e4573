// SecAggStageTracker: when a stage may close, and what a participant's withdrawal does to the
// stages after the one it withdrew in.
#include "aggregator/secagg_stage_tracker.h"

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(SecAggStageTrackerTest, AStageClosesOnceEveryoneAnsweredOrAtItsTimeout) {
  SecAggStageTracker t(10);
  t.SetFirstStageRule(0, 1, 2);
  t.Open(SecAggStage::kAdvertiseKeys, 3, {0, 1, 2}, kT0);
  t.MarkAnswered(0);
  t.MarkAnswered(1);
  EXPECT_FALSE(t.Ready(kT0 + absl::Seconds(100)));  // stage 0 without a first deadline waits
  t.MarkAnswered(2);
  EXPECT_TRUE(t.Ready(kT0));
  t.Open(SecAggStage::kShareKeys, 3, {0, 1, 2}, kT0);
  t.MarkAnswered(0);
  EXPECT_FALSE(t.Ready(kT0 + absl::Seconds(9)));
  EXPECT_TRUE(t.Ready(kT0 + absl::Seconds(10)));  // the late ones are dropped
}

// A participant that answered stage 0 and then withdrew (a spot notice while it waited for the
// key directory) is not waited for by the stages that follow: they close as soon as the others
// answered, not at their timeout. The next round starts with nobody withdrawn.
TEST(SecAggStageTrackerTest, AWithdrawalHoldsForTheRestOfTheRoundNotJustTheOpenStage) {
  SecAggStageTracker t(10);
  t.SetFirstStageRule(0, 1, 2);
  t.Open(SecAggStage::kAdvertiseKeys, 3, {0, 1, 2}, kT0);
  t.MarkAnswered(2);
  t.StopWaiting(2);  // it had answered this stage already
  t.MarkAnswered(0);
  EXPECT_FALSE(t.Ready(kT0));  // 1 still to answer
  t.MarkAnswered(1);
  EXPECT_TRUE(t.Ready(kT0));
  for (SecAggStage s : {SecAggStage::kShareKeys, SecAggStage::kMaskedInput}) {
    t.Open(s, 3, {0, 1, 2}, kT0);  // 2 advertised keys, so it is among the recipients
    t.MarkAnswered(0);
    t.MarkAnswered(1);
    EXPECT_TRUE(t.Ready(kT0)) << static_cast<int>(s);
  }
  t.Open(SecAggStage::kAdvertiseKeys, 3, {0, 1, 2}, kT0);  // the next round
  t.MarkAnswered(0);
  t.MarkAnswered(1);
  EXPECT_FALSE(t.Ready(kT0));
}

}  // namespace
}  // namespace sextant
