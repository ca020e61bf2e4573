// The federated run as trial 1 and its end (orchestrator/federated/run_record.h), on a real
// store and a FakeClock.
#include "orchestrator/federated/run_record.h"

#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

class RunRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    spec_.set_name("fl");
    spec_.mutable_objective()->set_metric("val_loss");
    spec_.mutable_federation()->set_rounds(5);
    store_ = *Store::Open(":memory:", true);
    record_.emplace(spec_, store_.get(), &clock_, &out_, clock_.Now());
  }

  RunStanding After(int64_t round) {
    RunStanding s;
    s.last_round = round;
    s.score = ModelScore{0.25, 0.9, 100};
    s.cost = 1.5;
    s.epsilon = 2.0;
    return s;
  }

  FakeClock clock_;
  std::ostringstream out_;
  v1::ExperimentSpec spec_;
  std::unique_ptr<Store> store_;
  std::optional<RunRecord> record_;
};

TEST_F(RunRecordTest, ACompletedRunIsACompletedTrialWhoseValueIsTheObjectivesScore) {
  clock_.Advance(absl::Seconds(30));
  EXPECT_DOUBLE_EQ(record_->Seconds(), 30);
  ASSERT_TRUE(record_->Completed(After(5)).ok());
  std::vector<TrialRow> trials = *store_->LoadTrials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].state, v1::COMPLETED);
  EXPECT_EQ(trials[0].fidelity, 5);
  ASSERT_TRUE(trials[0].value.has_value());
  EXPECT_EQ(*trials[0].value, 0.25);  // the objective names a loss
  EXPECT_EQ(*store_->GetRunState(), v1::RUN_COMPLETED);
  EXPECT_THAT(out_.str(), HasSubstr("fl finished: val_accuracy=0.9000 val_loss=0.2500"));
  EXPECT_THAT(out_.str(), HasSubstr(" cost=1.5 epsilon=2 after 5 rounds"));
}

TEST_F(RunRecordTest, EachEndHasItsStateAndItsStatus) {
  absl::Status failed = record_->Failed("every client failed", After(2));
  EXPECT_TRUE(absl::IsAborted(failed));
  EXPECT_THAT(failed.message(), HasSubstr("the federated run failed: every client failed"));
  EXPECT_EQ(*store_->GetRunState(), v1::RUN_FAILED);
  EXPECT_EQ(store_->LoadTrials()->at(0).state, v1::FAILED);

  EXPECT_TRUE(record_->EpsilonReached("epsilon 2.1 > 2", After(3)).ok());
  EXPECT_EQ(*store_->GetRunState(), v1::RUN_EPSILON_EXHAUSTED);
  EXPECT_THAT(out_.str(), HasSubstr("stopped after round 3: the privacy budget is spent"));

  EXPECT_TRUE(record_->PausedAtRung(After(3)).ok());
  EXPECT_EQ(*store_->GetRunState(), v1::RUN_INTERRUPTED);
  EXPECT_EQ(store_->LoadTrials()->at(0).state, v1::RUNNING);

  EXPECT_TRUE(absl::IsCancelled(record_->Stopped(v1::RUN_INTERRUPTED, After(3), "RUN")));
  EXPECT_TRUE(record_->Stopped(v1::RUN_BUDGET_EXHAUSTED, After(3), "RUN").ok());
  EXPECT_EQ(*store_->GetRunState(), v1::RUN_BUDGET_EXHAUSTED);
  EXPECT_THAT(out_.str(), HasSubstr("continue with: sextant resume RUN"));
}

// A stop keeps what the run did so far on its trial: the rounds and the participants the market
// took back (results' preemptions.total), and the trial stays resumable.
TEST_F(RunRecordTest, AStoppedRunKeepsItsRoundsAndPreemptions) {
  record_->Started("RUN", 100, After(0), nullptr);
  RunStanding s = After(4);
  s.preemptions = 30;
  EXPECT_TRUE(absl::IsCancelled(record_->Stopped(v1::RUN_INTERRUPTED, s, "RUN")));
  const TrialRow t = store_->LoadTrials()->at(0);
  EXPECT_EQ(t.state, v1::RUNNING);
  EXPECT_EQ(t.fidelity, 4);
  EXPECT_EQ(t.preemptions, 30);
}

}  // namespace
}  // namespace sextant
