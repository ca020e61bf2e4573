#include "orchestrator/fleet/fleet.h"

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/fleet/providers.h"
#include "orchestrator/fleet/static_provider.h"
#include "tests/fakes/fake_provider.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

using testing::FakeProvider;

v1::ExperimentSpec Spec(const std::string& pools, const std::string& budget = "") {
  return testing::SpecFromYaml(absl::StrCat(R"(name: fleet
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search: {sampler: random, max_trials: 10, max_concurrent: 4}
trial: {command: [echo]}
)",
                                            budget, "resources:\n  idle_timeout: 30s\n  pools:\n",
                                            pools));
}

// Registers a worker for every launched instance not yet registered.
void RegisterAll(const FakeProvider& p, FleetView& view) {
  for (const auto& [h, r] : p.live) {
    bool known = false;
    for (const auto& [id, w] : view.workers) known = known || w.launch_token == r.launch_token;
    if (!known)
      view.workers[static_cast<int64_t>(view.workers.size()) + 1] = {r.region, r.pool,
                                                                     r.launch_token};
  }
}

FleetOptions Options() {
  FleetOptions o;
  o.connect = "127.0.0.1:1";
  o.logs_dir = "/tmp";
  o.wind_down_seconds = 0;
  return o;
}

TEST(FleetTest, GrowsToTheQueueWithinOneTickUpToMaxAndShrinksIdleInstancesAtTheirPaidEnd) {
  FakeClock clock;
  FakeProvider provider;
  auto fleet = Fleet::Create(Spec("    - {name: od, region: us-east-1, instance: gpu.1x, market: "
                                  "on_demand, max_instances: 3}\n"),
                             Catalog::Default(), &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  FleetView view;
  view.demand = 5;
  FleetTick t = (*fleet)->Tick(view);
  EXPECT_EQ(provider.live.size(), 3u);  // capped at max_instances, all in one tick
  // Booting instances count against the queue: no more launches while they boot.
  (*fleet)->Tick(view);
  EXPECT_EQ(provider.live.size(), 3u);
  RegisterAll(provider, view);
  view.running = {{1, 1}, {2, 2}, {3, 3}};
  view.demand = 1;
  (*fleet)->Tick(view);  // the trials start now
  clock.Advance(absl::Seconds(10));
  (*fleet)->Tick(view);
  EXPECT_EQ(provider.live.size(), 3u);
  // The work ends; idle for 30 s is not enough while the 60 s minimum is paid.
  view.running.clear();
  view.demand = 0;
  (*fleet)->Tick(view);
  clock.Advance(absl::Seconds(31));  // t = 41: idle past the timeout, paid until 60
  (*fleet)->Tick(view);
  EXPECT_EQ(provider.live.size(), 3u);
  clock.Advance(absl::Seconds(15));  // t = 56: within 5 s of the paid end
  (*fleet)->Tick(view);
  EXPECT_EQ(provider.live.size(), 0u);
  EXPECT_EQ(provider.terminated.size(), 3u);
  // Each billed its 60 s minimum at 2.4/h; each trial ran 10 s of it.
  EXPECT_NEAR((*fleet)->committed(), 3 * 60 * 2.4 / 3600, 1e-12);
  CostBreakdown b = (*fleet)->ledger().Breakdown();
  EXPECT_NEAR(b.by_trial[1], 10 * 2.4 / 3600, 1e-12);
  EXPECT_NEAR(b.by_pool["od"], 3 * 60 * 2.4 / 3600, 1e-12);
}

TEST(FleetTest, LedgerChargesIdleTimeUntilTerminationAndReservedCapacityWhole) {
  FakeClock clock;
  FakeProvider provider;
  auto fleet = Fleet::Create(Spec("    - {name: res, region: us-east-1, instance: gpu.1x, market: "
                                  "reserved, max_instances: 2}\n"
                                  "    - {name: od, region: us-east-1, instance: gpu.1x, market: "
                                  "on_demand, max_instances: 1}\n"),
                             Catalog::Default(), &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  FleetView view;
  view.demand = 1;
  FleetTick t = (*fleet)->Tick(view);
  ASSERT_EQ(provider.live.size(), 1u);
  EXPECT_EQ(provider.live.begin()->second.pool, "res");  // prepaid capacity first
  // The reservation: 2 instances x 1 h at 1.56/h, charged whole at once.
  EXPECT_NEAR((*fleet)->committed(), 2 * 1.56, 1e-9);
  RegisterAll(provider, view);
  view.demand = 0;
  view.running = {{1, 7}};
  (*fleet)->Tick(view);
  clock.Advance(absl::Seconds(100));
  (*fleet)->Tick(view);
  EXPECT_NEAR((*fleet)->committed(), 2 * 1.56,
              1e-9);  // running on prepaid capacity costs nothing more
  EXPECT_NEAR((*fleet)->ledger().Breakdown().by_trial[7], 100 * 1.56 / 3600, 1e-9);
  bool reserved_event = false;
  for (const auto& e : t.events) reserved_event = reserved_event || e.kind == "reservation";
  EXPECT_TRUE(reserved_event);
}

TEST(FleetTest, BudgetRefusesALaunchThatWouldExceedTheCapAndStopsAtIt) {
  FakeClock clock;
  FakeProvider provider;
  // One minimum bill of gpu.1x on demand is 60 s x 2.4/h = 0.04: the cap pays for two.
  auto fleet = Fleet::Create(Spec("    - {name: od, region: us-east-1, instance: gpu.1x, market: "
                                  "on_demand, max_instances: 4}\n",
                                  "budget: {max_cost: 0.09}\n"),
                             Catalog::Default(), &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  FleetView view;
  view.demand = 4;
  FleetTick t = (*fleet)->Tick(view);
  EXPECT_EQ(provider.live.size(), 2u);
  bool refused = false;
  for (const auto& e : t.events)
    refused =
        refused || (e.kind == "budget_refused" && e.message.find("max_cost") != std::string::npos);
  EXPECT_TRUE(refused);
  RegisterAll(provider, view);
  view.running = {{1, 1}, {2, 2}};
  view.demand = 2;
  // Committed grows per second after the minimum; the next increment of both would pass 0.09
  // at 2 x 67.5 s x 2.4/h = 0.09.
  double last = 0;
  for (int s = 0; s < 200 && !(*fleet)->exhausted(); ++s) {
    clock.Advance(absl::Seconds(1));
    last = (*fleet)->committed();
    (*fleet)->Tick(view);
  }
  ASSERT_TRUE((*fleet)->exhausted());
  (*fleet)->TerminateAll();
  (*fleet)->Reap(/*force=*/true);
  const double increment_each = 2 * 1 * 2.4 / 3600;
  EXPECT_LE((*fleet)->committed(), 0.09 + increment_each + 1e-12);
  EXPECT_GE((*fleet)->committed(), last);
}

TEST(FleetTest, TopRungDemandLaunchesOnDemandUnderMixedPlacementWhileLowRungsGoToSpot) {
  FakeClock clock;
  FakeProvider provider;
  v1::ExperimentSpec spec = testing::SpecFromYaml(R"(name: fleet
objective: {metric: loss}
parameters: {x: {type: float, min: 0, max: 1}}
search: {sampler: random, scheduler: asha, fidelity: {name: epoch, min: 1, max: 9, reduction_factor: 3},
         max_trials: 10, max_concurrent: 4}
trial: {command: [echo]}
resources:
  placement: {policy: mixed}
  pools:
    - {name: spot, region: us-east-1, instance: gpu.1x, market: spot, max_instances: 4}
    - {name: od, region: us-east-1, instance: gpu.1x, market: on_demand, max_instances: 4}
)");
  auto fleet = Fleet::Create(spec, Catalog::Default(), &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  std::string why;
  EXPECT_EQ((*fleet)->PoolsOffTheTopRung(&why), std::set<std::string>{"spot"});
  EXPECT_THAT(why, HasSubstr("mixed placement"));
  // Three low-rung jobs and one top-rung job want workers.
  FleetView view;
  view.demand = 4;
  view.top_rung_demand = 1;
  FleetTick tick = (*fleet)->Tick(view);
  std::map<std::string, int> launched;
  for (const auto& [h, r] : provider.live) ++launched[r.pool];
  EXPECT_EQ(launched["od"], 1);
  EXPECT_EQ(launched["spot"], 3);
  bool top_reason = false;
  for (const auto& e : tick.events) {
    top_reason = top_reason || (e.kind == "placement" && e.message.find("pool od") == 0 &&
                                e.message.find("top rung") != std::string::npos);
  }
  EXPECT_TRUE(top_reason) << "no placement event says why the top rung went to pool od";
}

TEST(FleetTest, UnderSpotFirstPlacementTheTopRungMayRunOnSpot) {
  FakeClock clock;
  FakeProvider provider;
  auto fleet = Fleet::Create(Spec("    - {name: spot, region: us-east-1, instance: gpu.1x, market: "
                                  "spot, max_instances: 4}\n"
                                  "    - {name: od, region: us-east-1, instance: gpu.1x, market: "
                                  "on_demand, max_instances: 4}\n"),
                             Catalog::Default(), &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  std::string why;
  EXPECT_TRUE((*fleet)->PoolsOffTheTopRung(&why).empty());
}

// Once the cap pays for no more instances and none is left, work waits that the fleet can never
// run, and it says the budget is why (the run winds down BUDGET_EXHAUSTED rather than failing).
TEST(FleetTest, ACapThatPaysForNoMoreInstancesIsStuckOnTheBudget) {
  FakeClock clock;
  FakeProvider provider;
  // One minimum bill of gpu.1x on demand is 60 s x 2.4/h = 0.04: the cap pays for one.
  auto fleet = Fleet::Create(Spec("    - {name: od, region: us-east-1, instance: gpu.1x, market: "
                                  "on_demand, max_instances: 4}\n",
                                  "budget: {max_cost: 0.05}\n"),
                             Catalog::Default(), &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  FleetView view;
  view.demand = 2;
  (*fleet)->Tick(view);
  EXPECT_EQ(provider.live.size(), 1u);
  std::string why;
  EXPECT_EQ((*fleet)->Stuck(&why), Fleet::StuckOn::kNone);  // one instance is still live
  provider.live.clear();                                    // it is gone
  for (int s = 0; s < 5; ++s) {
    clock.Advance(absl::Seconds(1));
    (*fleet)->Tick(view);
  }
  EXPECT_TRUE(provider.live.empty());
  EXPECT_EQ((*fleet)->Stuck(&why), Fleet::StuckOn::kBudget);
  EXPECT_THAT(why, HasSubstr("the budget pays for no instance"));
}

TEST(FleetTest, LaunchFailuresBackOffMoveToAnotherPoolAndGiveUpBounded) {
  FakeClock clock;
  FakeProvider provider;
  provider.refuse_launches = 1000;
  auto fleet = Fleet::Create(Spec("    - {name: a, region: us-east-1, instance: gpu.1x, market: "
                                  "on_demand, max_instances: 1}\n"
                                  "    - {name: b, region: eu-west-1, instance: gpu.1x, market: "
                                  "on_demand, max_instances: 1}\n"),
                             Catalog::Default(), &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  FleetView view;
  view.demand = 1;
  std::string why;
  int ticks = 0;
  for (; ticks < 10000 && (*fleet)->Stuck(&why) == Fleet::StuckOn::kNone; ++ticks) {
    (*fleet)->Tick(view);
    clock.Advance(absl::Seconds(1));
  }
  EXPECT_EQ((*fleet)->Stuck(&why), Fleet::StuckOn::kLaunchFailed);
  EXPECT_THAT(why, HasSubstr("every pool failed"));
  // Five tries per pool with backoff 1, 2, 4, 8 s between them: both pools, bounded.
  EXPECT_EQ(provider.refused, 10);
  EXPECT_LT(ticks, 60);
  for (const FleetPoolStats& s : (*fleet)->pool_stats()) EXPECT_EQ(s.launch_failures, 5);
}

TEST(FleetTest, SpotInterruptionSendsTheNoticeThenTakesTheInstanceBack) {
  FakeClock clock;
  FakeProvider provider;
  std::vector<CatalogError> errors;
  Catalog catalog = Catalog::Parse(R"(regions: [us-east-1]
instances: {gpu.1x: {gpus: 1, gpu_memory_gb: 80, cpus: 16}}
offers:
  - {region: us-east-1, instance: gpu.1x, market: spot, price_per_hour: 0.72,
     interruption: {rate_per_day: 8640, notice: 2s, notice_probability: 1}}
)",
                                   &errors);
  ASSERT_TRUE(errors.empty()) << errors[0].message;
  auto fleet = Fleet::Create(
      Spec(
          "    - {name: s, region: us-east-1, instance: gpu.1x, market: spot, max_instances: 1}\n"),
      catalog, &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  FleetView view;
  view.demand = 1;
  (*fleet)->Tick(view);
  ASSERT_EQ(provider.live.size(), 1u);
  EXPECT_GT(provider.live.begin()->second.preempt_notice_seconds, 0);
  EXPECT_LE(provider.live.begin()->second.preempt_notice_seconds, 2);
  RegisterAll(provider, view);
  view.running = {{1, 3}};
  // 8640 per day = one per 10 s on average: within 200 s it comes, notice first.
  for (int s = 0; s < 200 && provider.killed.empty(); ++s) {
    clock.Advance(absl::Milliseconds(500));
    (*fleet)->Tick(view);
  }
  ASSERT_EQ(provider.noticed.size(), 1u);
  ASSERT_EQ(provider.killed.size(), 1u);
  EXPECT_EQ(provider.noticed[0], provider.killed[0]);
  std::vector<FleetPoolStats> stats = (*fleet)->pool_stats();
  EXPECT_EQ(stats[0].interruptions, 1);
  EXPECT_EQ(stats[0].preemptions, 1);
}

TEST(FleetTest, StaticWorkersAreAdoptedAndBilledFromRegistration) {
  FakeClock clock;
  StaticProvider provider;
  auto fleet = Fleet::Create(Spec("    - {name: lab, region: us-east-1, instance: gpu.1x, market: "
                                  "on_demand, max_instances: 4}\n"),
                             Catalog::Default(), &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  FleetView view;
  view.demand = 2;
  (*fleet)->Tick(view);
  EXPECT_EQ((*fleet)->ledger().live_instances(), 0);  // nothing is launched
  view.workers[1] = {"us-east-1", "lab", ""};
  view.workers[2] = {"us-east-1", "elsewhere", ""};
  FleetTick t = (*fleet)->Tick(view);
  EXPECT_EQ((*fleet)->ledger().live_instances(), 1);
  std::set<std::string> kinds;
  for (const auto& e : t.events) kinds.insert(e.kind);
  EXPECT_TRUE(kinds.count("instance_adopted"));
  EXPECT_TRUE(kinds.count("worker_unbilled"));
  clock.Advance(absl::Seconds(120));
  EXPECT_NEAR((*fleet)->committed(), 120 * 2.4 / 3600, 1e-12);
}

// Pools on different providers: the cloud pool's instances are launched (and polled, ended
// and taken back) through its provider, the lab pool's workers are started by hand and adopted
// as they register; a worker on the cloud pool that no launch made is not billed.
TEST(FleetTest, EachPoolLaunchesThroughItsOwnProvider) {
  FakeClock clock;
  auto cloud = std::make_shared<FakeProvider>();
  PoolProviders providers({{"cloud", cloud}, {"lab", std::make_shared<StaticProvider>()}});
  EXPECT_FALSE(providers.launches());
  EXPECT_TRUE(providers.Launches("cloud"));
  EXPECT_FALSE(providers.Launches("lab"));
  EXPECT_FALSE(providers.Launches("elsewhere"));
  auto fleet = Fleet::Create(
      Spec("    - {name: cloud, region: us-east-1, instance: gpu.1x, market: spot, "
           "max_instances: 2}\n"
           "    - {name: lab, region: us-east-1, instance: gpu.1x, market: on_demand, "
           "max_instances: 2}\n"),
      Catalog::Default(), &providers, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  FleetView view;
  view.demand = 4;
  FleetTick t = (*fleet)->Tick(view);
  ASSERT_EQ(cloud->live.size(), 2u);  // the lab has nothing to launch
  for (const auto& [h, r] : cloud->live) EXPECT_EQ(r.pool, "cloud");
  bool labelled = false;
  for (const auto& e : t.events) {
    labelled =
        labelled || (e.kind == "instance_launched" && absl::StrContains(e.message, "(fake h"));
  }
  EXPECT_TRUE(labelled) << "events name the instance as its own provider does";
  RegisterAll(*cloud, view);
  view.workers[3] = {"us-east-1", "lab", ""};
  view.workers[4] = {"us-east-1", "cloud", ""};
  t = (*fleet)->Tick(view);
  EXPECT_EQ((*fleet)->ledger().live_instances(), 3);
  std::set<std::string> kinds;
  for (const auto& e : t.events) kinds.insert(e.kind);
  EXPECT_TRUE(kinds.count("instance_adopted"));
  EXPECT_TRUE(kinds.count("worker_unbilled"));
  // A cloud instance's end reaches the provider that launched it, under its own handle.
  view.demand = 0;
  const std::string first = cloud->live.begin()->first;
  cloud->live.erase(first);
  for (int i = 0; i < 3; ++i) {
    clock.Advance(absl::Seconds(5));
    (*fleet)->Tick(view);
  }
  EXPECT_EQ((*fleet)->ledger().live_instances(), 2);
  EXPECT_EQ(providers.Poll("0:" + first).gone(), true);
  EXPECT_EQ(providers.Poll("9:h1").detail, "unknown instance");
}

// A hand-started worker is billed from the moment it joins: the budget must allow that as it
// would a launch, or the worker is retired (no work, no bill).
TEST(FleetTest, StaticWorkersAreAdoptedOnlyWithinTheBudget) {
  FakeClock clock;
  StaticProvider provider;
  // One minimum bill of gpu.1x on demand is 60 s x 2.4/h = 0.04: the cap pays for one.
  auto fleet = Fleet::Create(Spec("    - {name: lab, region: us-east-1, instance: gpu.1x, market: "
                                  "on_demand, max_instances: 4}\n",
                                  "budget: {max_cost: 0.05}\n"),
                             Catalog::Default(), &provider, &clock, Options());
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  FleetView view;
  view.demand = 2;
  view.workers[1] = {"us-east-1", "lab", ""};
  FleetTick first = (*fleet)->Tick(view);
  EXPECT_EQ((*fleet)->ledger().live_instances(), 1);
  EXPECT_TRUE(first.retire.empty());
  view.workers[2] = {"us-east-1", "lab", ""};
  FleetTick second = (*fleet)->Tick(view);
  EXPECT_EQ((*fleet)->ledger().live_instances(), 1);
  EXPECT_EQ(second.retire, std::vector<int64_t>{2});
  bool refused = false;
  for (const auto& e : second.events) {
    refused =
        refused || (e.kind == "budget_refused" &&
                    e.message.find("worker 2 not adopted into pool lab") != std::string::npos);
  }
  EXPECT_TRUE(refused);
  clock.Advance(absl::Seconds(60));
  (*fleet)->Tick(view);
  EXPECT_NEAR((*fleet)->committed(), 60 * 2.4 / 3600, 1e-12);  // one worker's bill only
}

// A reservation that runs out is renewed only when the budget covers another whole one;
// otherwise the pool's instances terminate.
TEST(FleetTest, AReservationIsRenewedOnlyWithinTheBudget) {
  for (const double cap : {10.0, 4.0}) {
    FakeClock clock;
    FakeProvider provider;
    // One reservation: 2 instances x 1 h at 1.56/h = 3.12, paid whole.
    auto fleet = Fleet::Create(Spec("    - {name: res, region: us-east-1, instance: gpu.1x, "
                                    "market: reserved, max_instances: 2}\n",
                                    absl::StrCat("budget: {max_cost: ", cap, "}\n")),
                               Catalog::Default(), &provider, &clock, Options());
    ASSERT_TRUE(fleet.ok()) << fleet.status();
    FleetView view;
    view.demand = 1;
    (*fleet)->Tick(view);
    ASSERT_EQ(provider.live.size(), 1u) << cap;
    RegisterAll(provider, view);
    view.running = {{1, 7}};
    view.demand = 0;
    clock.Advance(absl::Hours(1) + absl::Seconds(1));
    FleetTick t = (*fleet)->Tick(view);
    std::set<std::string> kinds;
    for (const auto& e : t.events) kinds.insert(e.kind);
    if (cap == 10.0) {
      EXPECT_TRUE(kinds.count("reservation")) << cap;
      EXPECT_NEAR((*fleet)->committed(), 2 * 3.12, 1e-9);
      EXPECT_EQ(provider.live.size(), 1u);
    } else {
      EXPECT_TRUE(kinds.count("budget_refused")) << cap;
      EXPECT_NEAR((*fleet)->committed(), 3.12, 1e-9);  // no second reservation was bought
      EXPECT_TRUE(provider.live.empty());
      EXPECT_EQ(t.retire, std::vector<int64_t>{1});
    }
  }
}

}  // namespace
}  // namespace sextant
