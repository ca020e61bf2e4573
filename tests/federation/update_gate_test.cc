#include "federation/update_gate.h"

#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

UpdateHeader Header(int64_t round, std::string client, std::string experiment = "exp") {
  return {std::move(experiment), round, std::move(client), 10};
}

TEST(UpdateGateTest, AcceptsOneUpdatePerClientPerRound) {
  UpdateGate gate("exp", 3);
  ASSERT_TRUE(gate.OpenRound(1).ok());
  const std::vector<float> u = {1, 2, 3};
  EXPECT_TRUE(gate.Check(Header(1, "a"), u).ok());
  EXPECT_TRUE(gate.Check(Header(1, "b"), u).ok());
  EXPECT_EQ(gate.Check(Header(1, "a"), u).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(gate.accepted(), 2u);
  EXPECT_EQ(gate.rejections("a", RejectReason::kDuplicate), 1);
  EXPECT_EQ(gate.rejections("b"), 0);
}

TEST(UpdateGateTest, OtherExperimentStaleAndFutureRoundsAreAbortedAndCounted) {
  UpdateGate gate("exp", 2);
  ASSERT_TRUE(gate.OpenRound(4).ok());
  const std::vector<float> u = {1, 2};
  EXPECT_EQ(gate.Check(Header(4, "a", "other"), u).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(gate.Check(Header(3, "a"), u).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(gate.Check(Header(5, "a"), u).code(), absl::StatusCode::kAborted);
  gate.CloseRound();
  EXPECT_EQ(gate.Check(Header(4, "b"), u).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(gate.rejections("a", RejectReason::kWrongExperiment), 1);
  EXPECT_EQ(gate.rejections("a", RejectReason::kStaleRound), 1);
  EXPECT_EQ(gate.rejections("a", RejectReason::kFutureRound), 1);
  EXPECT_EQ(gate.rejections("b", RejectReason::kStaleRound), 1);
  EXPECT_EQ(gate.rejections(RejectReason::kStaleRound), 2);
  EXPECT_EQ(gate.rejections("a"), 3);
  EXPECT_EQ(gate.accepted(), 0u);
}

TEST(UpdateGateTest, WrongShapeNonFiniteAndBadWeightAreInvalidAndTheRoundGoesOn) {
  UpdateGate gate("exp", 2);
  ASSERT_TRUE(gate.OpenRound(1).ok());
  EXPECT_EQ(gate.Check(Header(1, "a"), std::vector<float>{1, 2, 3}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      gate.Check(Header(1, "b"), std::vector<float>{1, std::numeric_limits<float>::infinity()})
          .code(),
      absl::StatusCode::kInvalidArgument);
  UpdateHeader zero = Header(1, "c");
  zero.num_examples = 0;
  EXPECT_EQ(gate.Check(zero, std::vector<float>{1, 2}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(gate.Check(Header(1, "d"), std::vector<float>{1, 2}).ok());
  EXPECT_EQ(gate.rejections("a", RejectReason::kWrongShape), 1);
  EXPECT_EQ(gate.rejections("b", RejectReason::kNonFinite), 1);
  EXPECT_EQ(gate.rejections("c", RejectReason::kBadWeight), 1);
  EXPECT_EQ(gate.accepted(), 1u);
  // A rejected update does not count as delivered: the client may send a good one.
  EXPECT_TRUE(gate.Check(Header(1, "b"), std::vector<float>{1, 2}).ok());
}

TEST(UpdateGateTest, ChunksAreCheckedAsTheyArriveAndABadChunkDropsTheUpdate) {
  UpdateGate gate("exp", 4);
  ASSERT_TRUE(gate.OpenRound(2).ok());
  ASSERT_TRUE(gate.Admit(Header(2, "a"), 4).ok());
  EXPECT_TRUE(gate.CheckValues("a", std::vector<float>{1, 2}).ok());
  EXPECT_EQ(gate.CheckValues("a", std::vector<float>{std::nanf(""), 2}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gate.CheckValues("a", std::vector<float>{1, 2}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gate.Accept("a").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gate.rejections("a", RejectReason::kNonFinite), 1);
}

TEST(UpdateGateTest, UpdateStillArrivingWhenTheRoundClosesIsStale) {
  UpdateGate gate("exp", 2);
  ASSERT_TRUE(gate.OpenRound(1).ok());
  ASSERT_TRUE(gate.Admit(Header(1, "slow"), 2).ok());
  gate.CloseRound();
  EXPECT_EQ(gate.CheckValues("slow", std::vector<float>{1, 2}).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(gate.rejections("slow", RejectReason::kStaleRound), 1);
}

TEST(UpdateGateTest, OnlySampledClientsAreAdmittedAndRoundsMustIncrease) {
  UpdateGate gate("exp", 1);
  const std::vector<std::string> sampled = {"a", "c"};
  ASSERT_TRUE(gate.OpenRound(1, sampled).ok());
  EXPECT_TRUE(gate.Check(Header(1, "a"), std::vector<float>{1}).ok());
  EXPECT_EQ(gate.Check(Header(1, "b"), std::vector<float>{1}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gate.rejections("b", RejectReason::kNotSampled), 1);
  EXPECT_EQ(gate.OpenRound(1).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(gate.OpenRound(2).ok());
  EXPECT_TRUE(gate.Check(Header(2, "a"), std::vector<float>{1}).ok());  // a new round, not a dup
  EXPECT_EQ(RejectReasonName(RejectReason::kDuplicate), "duplicate");
}

}  // namespace
}  // namespace sextant
