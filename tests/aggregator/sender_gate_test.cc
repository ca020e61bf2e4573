#include "aggregator/sender_gate.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

const PeerIdentity kAlice{Role::kClient, "eu", "alice"};

TierPolicy Regional() {
  TierPolicy p;
  p.region = "eu";
  p.max_client_weight = 1000;
  return p;
}

TierPolicy Global() {
  TierPolicy p;
  p.region_clients = {{"eu", 3}, {"us", 2}};
  p.max_client_weight = 1000;
  return p;
}

TEST(SenderGateTest, AClientSendsOnlyAsItselfToItsOwnRegion) {
  SenderGate gate(Regional());
  EXPECT_TRUE(gate.CheckCaller(kAlice, "eu/alice").ok());
  absl::Status other = gate.CheckCaller(kAlice, "eu/bob");
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(other.message(), HasSubstr("a client sends only as itself"));
  const PeerIdentity carol{Role::kClient, "us", "carol"};
  EXPECT_EQ(gate.CheckCaller(carol, "us/carol").code(), absl::StatusCode::kPermissionDenied);
  for (Role r : {Role::kWorker, Role::kAggregator, Role::kAdmin}) {
    EXPECT_EQ(gate.CheckCaller(PeerIdentity{r, "eu", "alice"}, "eu/alice").code(),
              absl::StatusCode::kPermissionDenied)
        << RoleName(r);
  }
  // Without a certificate identity (loopback), the id is taken as sent, but still bounded.
  EXPECT_TRUE(gate.CheckCaller(std::nullopt, "eu/bob").ok());
  EXPECT_EQ(gate.CheckCaller(std::nullopt, std::string(200, 'a') + "/0").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gate.CheckCaller(std::nullopt, "eu").code(), absl::StatusCode::kInvalidArgument);
}

TEST(SenderGateTest, OnlyARegionsAggregatorSendsItsAggregate) {
  SenderGate gate(Global());
  const PeerIdentity eu{Role::kAggregator, "eu", "agg"};
  EXPECT_TRUE(gate.CheckCaller(eu, "eu").ok());
  EXPECT_EQ(gate.CheckCaller(eu, "us").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckCaller(kAlice, "eu").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckCaller(PeerIdentity{Role::kWorker, "eu", "w"}, "eu").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckCaller(PeerIdentity{Role::kAggregator, "", "aggregator"}, "eu").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckCaller(eu, "eu/0").code(), absl::StatusCode::kInvalidArgument);
}

TEST(SenderGateTest, ARegionClaimsAtMostItsEnrolledClientsAndTheirWeight) {
  SenderGate gate(Global());
  EXPECT_TRUE(gate.CheckClaim("eu", 2500, 3).ok());
  EXPECT_EQ(gate.CheckClaim("eu", 100, 4).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckClaim("eu", 100, 0).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckClaim("us", 2001, 2).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckClaim("mars", 1, 1).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckClaim("eu", std::nan(""), 1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(SenderGateTest, AClientsWeightIsFixedByItsFirstAcceptedUpdate) {
  SenderGate gate(Regional());
  // A claim that is checked but never accepted (the hub refused the update) fixes nothing.
  EXPECT_TRUE(gate.CheckClaim("eu/alice", 900, 1).ok());
  EXPECT_TRUE(gate.CheckClaim("eu/alice", 600, 1).ok());
  gate.RecordClaim("eu/alice", 600);
  EXPECT_TRUE(gate.CheckClaim("eu/alice", 600, 1).ok());
  absl::Status more = gate.CheckClaim("eu/alice", 900, 1);
  EXPECT_EQ(more.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(more.message(), HasSubstr("declared 600 first"));
  EXPECT_EQ(gate.CheckClaim("eu/bob", 1001, 1).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckClaim("eu/bob", 10, 5).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(gate.CheckClaim("eu/bob", -1, 1).code(), absl::StatusCode::kInvalidArgument);
  // None of bob's refused claims fixed his weight.
  EXPECT_TRUE(gate.CheckClaim("eu/bob", 10, 1).ok());
}

TEST(SenderGateTest, TheTableOfDeclaredWeightsIsBounded) {
  TierPolicy p = Regional();
  p.max_senders = 3;
  SenderGate gate(p);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(gate.CheckClaim("eu/" + std::to_string(i), 1, 1).ok());
    gate.RecordClaim("eu/" + std::to_string(i), 1);
  }
  EXPECT_EQ(gate.CheckClaim("eu/3", 1, 1).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(gate.CheckClaim("eu/0", 1, 1).ok());
}

}  // namespace
}  // namespace sextant
