#include "orchestrator/federated/federated_billing.h"

#include <map>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gtest/gtest.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/federated_placement.h"

namespace sextant {
namespace {

// Two regions priced in round numbers: $1/s client instances, $0.5/s aggregator instances,
// billed per second with a 2 s minimum; 0.1 $/GB between the regions.
Catalog TestCatalog() {
  std::vector<CatalogError> errors;
  Catalog c = Catalog::Parse(R"(
regions: [east, west]
instances:
  big: {gpus: 1, gpu_memory_gb: 80, cpus: 8}
  small: {gpus: 0, gpu_memory_gb: 0, cpus: 2}
billing: {increment: 1s, minimum: 2s}
offers:
  - {region: east, instance: big, market: on_demand, price_per_second: 1}
  - {region: east, instance: small, market: on_demand, price_per_second: 0.5}
  - {region: west, instance: big, market: on_demand, price_per_second: 1}
  - {region: west, instance: big, market: spot, price_per_second: 0.25}
transfer:
  pairs: [{between: [east, west], per_gb: 0.1}]
)",
                             &errors);
  EXPECT_TRUE(errors.empty()) << errors[0].message;
  return c;
}

v1::ExperimentSpec Spec() {
  v1::ExperimentSpec spec;
  v1::Federation* f = spec.mutable_federation();
  for (const char* name : {"east", "west"}) {
    v1::FederatedRegion* r = f->add_regions();
    r->set_name(name);
    r->set_clients(2);
  }
  auto pool = [&](const char* name, const char* region, const char* instance,
                  v1::Pool::Market market, const char* hosts) {
    v1::Pool* p = spec.mutable_resources()->add_pools();
    p->set_name(name);
    p->set_region(region);
    p->set_instance(instance);
    p->set_market(market);
    p->set_hosts(hosts);
  };
  pool("east-clients", "east", "big", v1::Pool::ON_DEMAND, "clients");
  pool("east-agg", "east", "small", v1::Pool::ON_DEMAND, "aggregator");
  pool("west-od", "west", "big", v1::Pool::ON_DEMAND, "any");
  pool("west-spot", "west", "big", v1::Pool::SPOT, "any");
  return spec;
}

TEST(FederatedPlacementTest, EachRoleGoesToTheCheapestPoolOfItsRegionThatHostsIt) {
  absl::StatusOr<FederatedPlacement> p = FederatedPlacement::Create(Spec(), TestCatalog());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->For("east", false).owner.pool, "east-clients");
  EXPECT_EQ(p->For("east", true).owner.pool, "east-agg");
  EXPECT_EQ(p->For("west", false).owner.pool, "west-spot");
  EXPECT_EQ(p->For("west", true).owner.pool, "west-spot");
  EXPECT_EQ(p->global_region(), "east");
  EXPECT_DOUBLE_EQ(p->TransferPerByte("west")->down, 0.1 / 1e9);
  EXPECT_DOUBLE_EQ(p->TransferPerByte("west")->up, 0.1 / 1e9);
  EXPECT_DOUBLE_EQ(p->TransferPerByte("east")->down, 0);
  EXPECT_DOUBLE_EQ(p->TransferPerByte("east")->up, 0);
  EXPECT_FALSE(p->TransferPerByte("east/0").has_value());
  // 2 s minimum each: east 2 x $1 + $0.5, west 3 x $0.25.
  EXPECT_DOUBLE_EQ(p->FirstIncrements(), 2 * (2 * 1 + 0.5) + 2 * 3 * 0.25);

  v1::ExperimentSpec no_aggregator = Spec();
  no_aggregator.mutable_resources()->mutable_pools(1)->set_hosts("clients");
  absl::StatusOr<FederatedPlacement> refused =
      FederatedPlacement::Create(no_aggregator, TestCatalog());
  EXPECT_EQ(refused.status().message(), "region 'east' has no pool that can host its aggregator");
  v1::ExperimentSpec far = Spec();
  far.mutable_federation()->set_global_region("north");
  EXPECT_FALSE(FederatedPlacement::Create(far, TestCatalog()).ok());
}

// A federated search's trials share the pools: as many at once as every pool's max_instances
// holds of one trial's participants on it, at most max_concurrent; none when one does not fit.
TEST(FederatedPlacementTest, TrialsAtOnceAreWhatEveryPoolsMaxInstancesHolds) {
  v1::ExperimentSpec spec = Spec();
  spec.mutable_search()->set_max_concurrent(4);
  for (v1::Pool& p : *spec.mutable_resources()->mutable_pools()) p.set_max_instances(8);
  absl::StatusOr<FederatedPlacement> p = FederatedPlacement::Create(spec, TestCatalog());
  ASSERT_TRUE(p.ok()) << p.status();
  // east: 2 clients on east-clients, its aggregator on east-agg; west: all 3 on west-spot.
  EXPECT_EQ(p->instances(), (std::map<std::string, int64_t>{
                                {"east-agg", 1}, {"east-clients", 2}, {"west-spot", 3}}));
  EXPECT_EQ(FederatedTrialsAtOnce(spec, *p), 2);  // west-spot: 8 / 3
  spec.mutable_search()->set_max_concurrent(1);
  EXPECT_EQ(FederatedTrialsAtOnce(spec, *p), 1);
  spec.mutable_search()->set_max_concurrent(4);
  spec.mutable_resources()->mutable_pools(3)->set_max_instances(2);  // west-spot
  EXPECT_EQ(FederatedTrialsAtOnce(spec, *p), 0);
}

// An orchestrator outside every region (global_region: internet): each region pays its egress
// for the aggregates it sends up and its ingress (free unless priced) for the model it gets.
TEST(FederatedBillingTest, AGlobalTierOnTheInternetBillsEachRegionsEgressAndIngress) {
  std::vector<CatalogError> errors;
  // Two regions of $1/s instances, with the transfer prices `transfer` gives.
  auto with_transfer = [&](const std::string& transfer) {
    return Catalog::Parse(R"(
regions: [east, west]
instances: {big: {gpus: 1, gpu_memory_gb: 80, cpus: 8}}
offers:
  - {region: east, instance: big, market: on_demand, price_per_second: 1}
  - {region: west, instance: big, market: on_demand, price_per_second: 1}
transfer: )" + transfer + "\n",
                          &errors);
  };
  Catalog catalog = with_transfer("{between_regions_per_gb: 0.02, to_internet_per_gb: 0.09}");
  ASSERT_TRUE(errors.empty()) << errors[0].message;
  v1::ExperimentSpec spec = Spec();
  spec.mutable_federation()->set_global_region("internet");
  for (v1::Pool& p : *spec.mutable_resources()->mutable_pools()) {
    p.set_instance("big");
    p.set_market(v1::Pool::ON_DEMAND);
  }
  absl::StatusOr<FederatedPlacement> p = FederatedPlacement::Create(spec, catalog);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->global_region(), "internet");
  for (const char* region : {"east", "west"}) {
    EXPECT_DOUBLE_EQ(p->TransferPerByte(region)->down, 0) << region;
    EXPECT_DOUBLE_EQ(p->TransferPerByte(region)->up, 0.09 / 1e9) << region;
  }
  FakeClock clock;
  FederatedBilling bill(*p, &clock, clock.Now(), {});
  // Sent is the global tier's (down to the region), received its region's aggregate (up).
  bill.MeterTransfer({{"east", {3'000'000'000, 1'000'000'000}},
                      {"west", {1'000'000'000, 2'000'000'000}}});
  EXPECT_NEAR(bill.transfer(), 3 * 0.09, 1e-12);
  bill.MeterTransfer({{"west", {1'000'000'000, 3'000'000'000}}});  // 1 GB more up
  EXPECT_NEAR(bill.transfer(), 4 * 0.09, 1e-12);

  // Ingress priced too, and a catalog that prices no egress cannot place the run.
  catalog = with_transfer("{to_internet_per_gb: 0.09, from_internet_per_gb: 0.01}");
  ASSERT_TRUE(errors.empty()) << errors[0].message;
  EXPECT_DOUBLE_EQ(FederatedPlacement::Create(spec, catalog)->TransferPerByte("west")->down,
                   0.01 / 1e9);
  catalog = with_transfer("{between_regions_per_gb: 0.02}");
  ASSERT_TRUE(errors.empty()) << errors[0].message;
  EXPECT_EQ(FederatedPlacement::Create(spec, catalog).status().message(),
            "the catalog prices no transfer from east to the internet (add "
            "transfer.to_internet_per_gb)");
  // `internet` is no catalog region.
  errors.clear();
  Catalog::Parse("regions: [east, internet]\ninstances: {}\noffers: []\n", &errors);
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].message.find("regions: 'internet' is not a region"), std::string::npos)
      << errors[0].message;
}

// Start-up (participants loading their data) is paid in round 1's bill, but the projection of
// the next rounds goes by how long round 1 took once the rounds began.
TEST(FederatedBillingTest, TheProjectionLeavesTheStartUpOutOfRoundOnesLength) {
  FakeClock clock;
  FederatedBilling bill(*FederatedPlacement::Create(Spec(), TestCatalog()), &clock, clock.Now(),
                        {});
  (void)bill.Start("east", false);  // $1/s
  clock.Advance(absl::Seconds(30));  // start-up
  bill.RoundsBegin();
  clock.Advance(absl::Seconds(2));
  EXPECT_NEAR(bill.CloseRound(), 32, 1e-9);
  EXPECT_NEAR(bill.NextRoundProjection(), 2, 1e-9);
}

TEST(FederatedBillingTest, BillsInstancesPerSecondAndCrossRegionBytesAndProjectsTheNextRound) {
  FakeClock clock;
  const absl::Time run_start = clock.Now() - absl::Seconds(100);  // a resumed run's origin
  CostRow earlier{"instance", 1, "east-clients", "east", "on_demand", 10, 20, 7.0};
  FederatedBilling bill(*FederatedPlacement::Create(Spec(), TestCatalog()), &clock, run_start,
                        {earlier});
  EXPECT_DOUBLE_EQ(bill.Committed(), 7.0);
  const int64_t client = bill.Start("east", false);  // $1/s
  const int64_t agg = bill.Start("east", true);      // $0.5/s
  EXPECT_DOUBLE_EQ(bill.Committed(), 7.0 + 2 + 1);   // the 2 s minimums
  EXPECT_DOUBLE_EQ(bill.NextRoundProjection(), 0);   // no round yet
  clock.Advance(absl::Seconds(5));
  // The west aggregator moved 2 GB, the east one 1 GB (free: the global region's own).
  bill.MeterTransfer({{"west", {1'500'000'000, 500'000'000}},
                      {"east", {1'000'000'000, 0}},
                      {"west/0", {999, 999}}});
  EXPECT_NEAR(bill.transfer(), 0.2, 1e-12);
  EXPECT_NEAR(bill.CloseRound(), 5 + 2.5 + 0.2, 1e-9);  // round 1 from the start of billing
  // Another round of 5 s would add 5 s of each instance and as much transfer.
  EXPECT_NEAR(bill.NextRoundProjection(), 5 * 1.5 + 0.2, 1e-9);
  clock.Advance(absl::Seconds(3));
  bill.Stop(agg);
  bill.Stop(agg);                                                // stopped already: nothing
  bill.MeterTransfer({{"west", {2'500'000'000, 500'000'000}}});  // 1 GB more
  EXPECT_NEAR(bill.CloseRound(), 3 * 1.5 + 0.1, 1e-9);
  EXPECT_NEAR(bill.NextRoundProjection(), 5 * 1.0 + 0.2, 1e-9);  // only the client is live
  bill.StopAll();
  EXPECT_NEAR(bill.Committed(), 7 + 8 * 1 + 8 * 0.5 + 0.3, 1e-9);

  std::vector<CostRow> rows = bill.Rows();
  ASSERT_EQ(rows.size(), 1u + 2 + 3);  // earlier, two instances, three meterings
  EXPECT_EQ(rows[0].cost, 7.0);
  EXPECT_EQ(rows[1].pool, "east-clients");
  EXPECT_DOUBLE_EQ(rows[1].start, 100);  // seconds since the run's start
  EXPECT_DOUBLE_EQ(rows[1].end, 108);
  EXPECT_DOUBLE_EQ(rows[1].cost, 8);
  EXPECT_EQ(rows[2].pool, "east-agg");
  EXPECT_DOUBLE_EQ(rows[2].cost, 4);
  std::map<std::string, int64_t> bytes;
  double transfer = 0;
  for (size_t i = 3; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].kind, "transfer");
    bytes[rows[i].region] += rows[i].ref;
    transfer += rows[i].cost;
  }
  EXPECT_EQ(bytes,
            (std::map<std::string, int64_t>{{"east", 1'000'000'000}, {"west", 3'000'000'000}}));
  EXPECT_NEAR(transfer, 0.3, 1e-12);
  (void)client;
}

}  // namespace
}  // namespace sextant
