#include "orchestrator/federated/client_selection.h"

#include <map>
#include <set>
#include <string>
#include <vector>

#include "aggregator/federation_plan.h"
#include "common/ids.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

v1::Federation TwoRegionsOfFive(const std::string& policy, double per_round) {
  v1::Federation f;
  for (const char* name : {"east", "west"}) {
    v1::FederatedRegion* r = f.add_regions();
    r->set_name(name);
    r->set_clients(5);
  }
  f.set_clients_per_round(per_round);
  f.set_seed(7);
  f.set_client_selection(policy);
  return f;
}

std::set<std::string> Ids(const std::vector<Participant>& ps) {
  std::set<std::string> ids;
  for (const Participant& p : ps) ids.insert(ClientId(p.region, p.index));
  return ids;
}

// Three persistent stragglers, the others quick.
ClientSpeeds ThreeStragglers() {
  ClientSpeeds s;
  for (int i = 0; i < 5; ++i) {
    s.Observe(ClientId("east", i), i < 2 ? 20 : 4 + i * 0.1);
    s.Observe(ClientId("west", i), i < 1 ? 25 : 3 + i * 0.1);
  }
  return s;
}

TEST(ClientSelectionTest, RandomIsAUniformSeededSampleThatIgnoresSpeed) {
  const v1::Federation f = TwoRegionsOfFive("random", 0.5);
  const ClientSpeeds speeds = ThreeStragglers();
  std::map<std::string, int> times;
  for (int64_t round = 1; round <= 400; ++round) {
    const auto chosen = SelectClients(f, round, speeds);
    ASSERT_EQ(chosen.size(), 5u);
    EXPECT_EQ(Ids(chosen), Ids(SelectClients(f, round, ClientSpeeds())));  // speed plays no part
    for (const std::string& id : Ids(chosen)) ++times[id];
  }
  for (const auto& [id, n] : times) EXPECT_NEAR(n, 200, 45) << id;  // each in half the rounds
  EXPECT_EQ(times.size(), 10u);
}

TEST(ClientSelectionTest, FastestTriesEveryUnknownClientThenKeepsTheStragglersOut) {
  const v1::Federation f = TwoRegionsOfFive("fastest", 0.7);
  ClientSpeeds speeds;
  speeds.Observe("east/0", 20);
  // Unknown clients count as 0 s: the one known straggler is left out first.
  EXPECT_EQ(Ids(SelectClients(f, 1, speeds)).count("east/0"), 0u);
  const ClientSpeeds known = ThreeStragglers();
  for (int64_t round = 1; round <= 20; ++round) {
    const std::set<std::string> ids = Ids(SelectClients(f, round, known));
    EXPECT_EQ(ids, (std::set<std::string>{"east/2", "east/3", "east/4", "west/1", "west/2",
                                          "west/3", "west/4"}))
        << round;
  }
}

TEST(ClientSelectionTest, PowerOfChoiceSpreadsRoundsOverTheFastClientsInsteadOfTheSameFew) {
  const ClientSpeeds speeds = ThreeStragglers();
  std::map<std::string, int> power, fastest;
  for (int64_t round = 1; round <= 300; ++round) {
    for (const std::string& id :
         Ids(SelectClients(TwoRegionsOfFive("power_of_choice", 3), round, speeds))) {
      ++power[id];
    }
    for (const std::string& id :
         Ids(SelectClients(TwoRegionsOfFive("fastest", 3), round, speeds))) {
      ++fastest[id];
    }
  }
  // fastest: always the same three; power_of_choice: every one of the 7 fast clients, often,
  // and never a straggler while the 6 candidates hold 3 faster clients (they always do here).
  EXPECT_EQ(fastest.size(), 3u);
  EXPECT_EQ(power.size(), 7u);
  for (const auto& [id, n] : power) {
    EXPECT_TRUE(id != "east/0" && id != "east/1" && id != "west/0") << id;
    EXPECT_GT(n, 10) << id;  // the slowest of the fast ones least often
  }
}

// Under secure aggregation every region gives each round its share of the clients and at least
// 2 of them: 4 of 2 x 4 clients are 2 + 2 (across all clients, a round would often sample one
// region's single client, whose masked sum would be its update).
TEST(ClientSelectionTest, SecureAggregationSamplesEachRegionsShareAndAtLeastTwo) {
  v1::Federation f;
  for (auto [name, n] : {std::pair<const char*, int>{"east", 4}, {"west", 4}}) {
    v1::FederatedRegion* r = f.add_regions();
    r->set_name(name);
    r->set_clients(n);
  }
  f.set_secure_aggregation(true);
  f.set_clients_per_round(4);
  f.set_seed(3);
  EXPECT_EQ(RegionQuotas(f), (std::vector<int64_t>{2, 2}));
  std::map<std::string, int> times;
  for (int64_t round = 1; round <= 200; ++round) {
    std::map<std::string, int> per_region;
    for (const Participant& p : SelectClients(f, round, ClientSpeeds())) {
      ++per_region[p.region];
      ++times[ClientId(p.region, p.index)];
    }
    EXPECT_EQ(per_region, (std::map<std::string, int>{{"east", 2}, {"west", 2}})) << round;
  }
  EXPECT_EQ(times.size(), 8u);  // a uniform sample within each region
  for (const auto& [id, n] : times) EXPECT_NEAR(n, 100, 30) << id;

  // Shares follow the regions' sizes, with the minimum of 2 taken from the larger region.
  f.mutable_regions(0)->set_clients(2);
  f.mutable_regions(1)->set_clients(10);
  f.set_clients_per_round(6);
  EXPECT_EQ(RegionQuotas(f), (std::vector<int64_t>{2, 4}));
  f.set_clients_per_round(0.5);  // 6 of 12
  EXPECT_EQ(RegionQuotas(f), (std::vector<int64_t>{2, 4}));
  f.set_clients_per_round(11);
  EXPECT_EQ(RegionQuotas(f), (std::vector<int64_t>{2, 9}));
  // Fewer than 2 per region is impossible; without secure aggregation there are no quotas.
  f.set_clients_per_round(3);
  EXPECT_TRUE(RegionQuotas(f).empty());
  f.set_clients_per_round(6);
  f.set_secure_aggregation(false);
  EXPECT_TRUE(RegionQuotas(f).empty());
}

TEST(ClientSelectionTest, SpeedsAreAMovingMeanThatRoundTripsThroughJson) {
  ClientSpeeds s;
  s.Observe("east/0", 10);
  s.Observe("east/0", 2);
  s.Observe("east/1", -1);  // not a time: ignored
  EXPECT_DOUBLE_EQ(*s.Estimate("east/0"), 6);
  EXPECT_FALSE(s.Estimate("east/1").has_value());
  absl::StatusOr<ClientSpeeds> back = ClientSpeeds::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->estimates(), s.estimates());
  EXPECT_FALSE(ClientSpeeds::FromJson("[1, 2]").ok());
  EXPECT_FALSE(ClientSpeeds::FromJson("{\"a/0\": \"fast\"}").ok());
  EXPECT_FALSE(ClientSpeeds::FromJson("{not json").ok());
}

}  // namespace
}  // namespace sextant
