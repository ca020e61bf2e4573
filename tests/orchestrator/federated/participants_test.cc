// Participants at the end of a run, on a fake provider and clock: clients whose aggregator is
// already gone (taken back in the last round) are told to stop at once rather than waited for
// through the whole grace; while an aggregator lives, nobody is signalled before the grace ends.
#include "orchestrator/federated/participants.h"

#include <sstream>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/core/store.h"
#include "tests/fakes/fake_provider.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class ParticipantsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = *Store::Open(":memory:", true);
    participants_ = std::make_unique<Participants>(
        ParticipantsEnv{&provider_, &clock_, store_.get(), &err_, "/tmp", 1});
    participants_->Launch({"agg"}, "aggregator-a.log", "aggregator a", "a", /*aggregator=*/true);
    participants_->Launch({"client"}, "client-a-0.log", "client a/0", "a", false);
    ASSERT_EQ(provider_.live.size(), 2u) << err_.str();  // h1 the aggregator, h2 the client
  }

  testing::FakeProvider provider_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::ostringstream err_;
  std::unique_ptr<Participants> participants_;
};

TEST_F(ParticipantsTest, ClientsLeftWithoutTheirAggregatorAreToldToStopAtOnce) {
  provider_.live.erase("h1");  // the aggregator was taken back in the last round
  participants_->StopAll(absl::Seconds(15));
  EXPECT_THAT(provider_.noticed, ElementsAre("h2"));
  EXPECT_THAT(provider_.killed, ElementsAre("h2"));  // this fake's client never exits
}

TEST_F(ParticipantsTest, WhileAnAggregatorLivesNobodyIsSignalledBeforeTheGraceEnds) {
  const absl::Time start = clock_.Now();
  participants_->StopAll(absl::Seconds(15));
  EXPECT_THAT(provider_.noticed, IsEmpty());
  EXPECT_THAT(provider_.killed, ElementsAre("h1", "h2"));
  EXPECT_GE(clock_.Now() - start, absl::Seconds(15));
}

}  // namespace
}  // namespace sextant
