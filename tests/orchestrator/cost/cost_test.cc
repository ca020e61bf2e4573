#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/cost/autoscaler.h"
#include "orchestrator/cost/budget_guard.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/interruption_sampler.h"
#include "orchestrator/cost/ledger.h"
#include "orchestrator/cost/placement_policy.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(CatalogTest, DefaultCatalogPricesSpotAndReservedOffOnDemand) {
  Catalog c = Catalog::Default();
  ASSERT_TRUE(c.HasRegion("us-east-1"));
  ASSERT_TRUE(c.HasRegion("eu-west-1"));
  ASSERT_TRUE(c.HasRegion("ap-south-1"));
  for (const std::string& region : c.regions()) {
    for (const InstanceType& t : c.instances()) {
      const Offer* od = c.Find(region, t.name, Market::kOnDemand);
      const Offer* spot = c.Find(region, t.name, Market::kSpot);
      const Offer* res = c.Find(region, t.name, Market::kReserved);
      ASSERT_TRUE(od && spot && res) << region << " " << t.name;
      EXPECT_NEAR(spot->billing.price_per_second / od->billing.price_per_second, 0.30, 1e-6);
      EXPECT_NEAR(res->billing.price_per_second / od->billing.price_per_second, 0.65, 1e-6);
      EXPECT_EQ(od->billing.increment_seconds, 1);
      EXPECT_EQ(od->billing.minimum_seconds, 60);
      EXPECT_GT(spot->interruption.rate_per_day, 0);
    }
  }
  EXPECT_EQ(c.FindInstance("gpu.8x")->gpus, 8);
  EXPECT_NEAR(c.Find("us-east-1", "gpu.1x", Market::kOnDemand)->billing.price_per_second * 3600,
              2.40, 1e-9);
}

TEST(CatalogTest, ParseReportsBadPricesUnknownNamesAndKeysWithPositions) {
  std::vector<CatalogError> errors;
  Catalog c = Catalog::Parse(R"(regions: [r1]
instances:
  small: {gpus: 1, gpu_memory_gb: 16, cpus: 4}
offers:
  - {region: r1, instance: small, market: spot, price_per_hour: 0}
  - {region: r1, instance: big, market: on_demand, price_per_second: -1}
  - {region: r2, instance: small, market: on_demand, price_per_hour: 1}
  - {region: r1, instance: small, market: reserved, price_per_hour: 1, colour: red}
)",
                             &errors);
  std::vector<std::string> text;
  for (const CatalogError& e : errors)
    text.push_back(absl::StrCat(e.line, ":", e.col, ": ", e.message));
  EXPECT_THAT(text,
              ::testing::ElementsAre("5:65: offers[0].price_per_hour: must be > 0, got 0",
                                     "6:28: offers[1].instance: unknown instance type 'big'",
                                     "6:70: offers[1].price_per_second: must be > 0, got -1",
                                     "7:14: offers[2].region: unknown region 'r2'",
                                     ::testing::StartsWith("8:72: offers[3].colour: unknown key")));
  EXPECT_THAT(c.offers(), IsEmpty());
}

TEST(CatalogTest, BilledSecondsRoundsUpToIncrementWithMinimum) {
  BillingTerms t{1.0, 10, 60};
  EXPECT_EQ(BilledSeconds(0, t), 60);
  EXPECT_EQ(BilledSeconds(59, t), 60);
  EXPECT_EQ(BilledSeconds(60, t), 60);
  EXPECT_EQ(BilledSeconds(61, t), 70);
  EXPECT_EQ(BilledSeconds(70, t), 70);
  EXPECT_EQ(BilledSeconds(3601, BillingTerms{1, 3600, 0}), 7200);
}

TEST(LedgerTest, ChargesMinimumIncrementsAndIdleTimeExactly) {
  FakeClock clock;
  Ledger ledger(&clock);
  const BillingTerms per_second{0.01, 1, 60};
  const BillingTerms per_minute{0.02, 60, 60};
  int64_t a = ledger.Launch({"a", "r1", Market::kOnDemand}, per_second);
  int64_t b = ledger.Launch({"b", "r2", Market::kSpot}, per_minute);
  EXPECT_DOUBLE_EQ(ledger.Committed(), 0.01 * 60 + 0.02 * 60);  // the minimums, at launch
  clock.Advance(absl::Seconds(10));
  ASSERT_TRUE(ledger.StartTrial(a, 7).ok());
  clock.Advance(absl::Seconds(100));  // t = 110
  ASSERT_TRUE(ledger.EndTrial(a).ok());
  ASSERT_TRUE(ledger.StartTrial(b, 8).ok());
  clock.Advance(absl::Seconds(15));  // t = 125: a idle since 110
  ASSERT_TRUE(ledger.Terminate(a).ok());
  ASSERT_TRUE(ledger.Terminate(b).ok());  // b ends its trial at termination
  clock.Advance(absl::Seconds(1000));     // nothing more accrues
  CostBreakdown cost = ledger.Breakdown();
  EXPECT_DOUBLE_EQ(cost.by_pool["a"], 0.01 * 125);  // idle time included
  EXPECT_DOUBLE_EQ(cost.by_pool["b"], 0.02 * 180);  // 125 s rounds up to 3 minutes
  EXPECT_DOUBLE_EQ(cost.by_region["r2"], 0.02 * 180);
  EXPECT_DOUBLE_EQ(cost.total, 0.01 * 125 + 0.02 * 180);
  EXPECT_DOUBLE_EQ(cost.by_trial[7], 0.01 * 100);
  EXPECT_DOUBLE_EQ(cost.by_trial[8], 0.02 * 15);
  EXPECT_DOUBLE_EQ(cost.unattributed, cost.total - 1.0 - 0.3);
  EXPECT_DOUBLE_EQ(ledger.Committed(), cost.total);
  EXPECT_EQ(ledger.live_instances(), 0);
  EXPECT_FALSE(ledger.Terminate(a).ok());
}

TEST(LedgerTest, ReservedCapacityIsChargedWholeWhetherUsedOrNot) {
  FakeClock clock;
  Ledger ledger(&clock);
  const BillingTerms reserved{0.005, 1, 60};
  int64_t r = ledger.Reserve({"res", "r1", Market::kReserved}, reserved, 4, 3600);
  EXPECT_DOUBLE_EQ(ledger.Committed(), 0.005 * 3600 * 4);
  int64_t i = ledger.Launch({"res", "r1", Market::kReserved}, reserved, r);
  ASSERT_TRUE(ledger.StartTrial(i, 1).ok());
  clock.Advance(absl::Seconds(200));
  ASSERT_TRUE(ledger.Terminate(i).ok());
  CostBreakdown cost = ledger.Breakdown();
  EXPECT_DOUBLE_EQ(cost.total, 0.005 * 3600 * 4);   // nothing on top of the reservation
  EXPECT_DOUBLE_EQ(cost.by_trial[1], 0.005 * 200);  // attributed at the reservation's rate
}

TEST(LedgerTest, ExtraUntilPricesKeepingAnInstanceToALaterTime) {
  FakeClock clock;
  Ledger ledger(&clock);
  int64_t a = ledger.Launch({"a", "r", Market::kOnDemand}, BillingTerms{1, 10, 60});
  clock.Advance(absl::Seconds(30));
  EXPECT_DOUBLE_EQ(ledger.ExtraUntil(a, clock.Now() + absl::Seconds(20)), 0);   // within minimum
  EXPECT_DOUBLE_EQ(ledger.ExtraUntil(a, clock.Now() + absl::Seconds(31)), 10);  // 61 s -> 70
  EXPECT_EQ(ledger.PaidUntil(a), clock.Now() + absl::Seconds(30));
  EXPECT_DOUBLE_EQ(Ledger::LaunchCost(BillingTerms{1, 10, 60}, 61), 70);
}

TEST(BudgetGuardTest, RefusesActionsThatWouldExceedTheCap) {
  BudgetGuard guard(10.0);
  EXPECT_TRUE(guard.Allows(4, 3, 3));
  std::string why;
  EXPECT_FALSE(guard.Allows(4, 3, 3.5, &why));
  EXPECT_THAT(why, HasSubstr("would exceed max_cost 10"));
  EXPECT_FALSE(guard.Exhausted(9.99));
  EXPECT_TRUE(guard.Exhausted(10));
  EXPECT_TRUE(BudgetGuard(std::nullopt).Allows(1e9, 1e9, 1e9));
}

std::vector<PoolCandidate> ThreePools() {
  InstanceType gpu{"gpu.1x", 1, 80, 16};
  return {
      {"od", "us-east-1", Market::kOnDemand, 2.4 / 3600, gpu, 4, false},
      {"spot-us", "us-east-1", Market::kSpot, 0.72 / 3600, gpu, 4, false},
      {"spot-ap", "ap-south-1", Market::kSpot, 0.648 / 3600, gpu, 4, false},
  };
}

TEST(PlacementPolicyTest, SpotFirstPicksCheapestSpotForCheckpointingTrials) {
  PlacementPolicy policy({PlacementOptions::Mode::kSpotFirst, 600});
  Placement p = policy.Place(PlacementRequest{}, ThreePools(), absl::UnixEpoch());
  ASSERT_TRUE(p.placed());
  EXPECT_EQ(p.pool, 2);
  EXPECT_THAT(p.reason, HasSubstr("pool spot-ap (spot, ap-south-1"));
  PlacementRequest no_checkpoint;
  no_checkpoint.checkpoints = false;
  EXPECT_EQ(policy.Place(no_checkpoint, ThreePools(), absl::UnixEpoch()).pool, 0);
}

TEST(PlacementPolicyTest, MixedSendsTopRungToOnDemandAndLowRungsToSpot) {
  PlacementPolicy policy({PlacementOptions::Mode::kMixed, 600});
  PlacementRequest low, top;
  top.top_rung = true;
  EXPECT_EQ(policy.Place(low, ThreePools(), absl::UnixEpoch()).pool, 2);
  Placement p = policy.Place(top, ThreePools(), absl::UnixEpoch());
  EXPECT_EQ(p.pool, 0);
  EXPECT_THAT(p.reason, HasSubstr("top rung"));
  // The on-demand pool is full: the top-rung job waits rather than going to spot.
  std::vector<PoolCandidate> full = ThreePools();
  full[0].free_slots = 0;
  EXPECT_FALSE(policy.Place(top, full, absl::UnixEpoch()).placed());
}

TEST(PlacementPolicyTest, RegionWithRecentPreemptionIsAvoidedUntilCooldownEnds) {
  PlacementPolicy policy({PlacementOptions::Mode::kSpotFirst, 600});
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  policy.OnPreemption("ap-south-1", t0);
  Placement p = policy.Place(PlacementRequest{}, ThreePools(), t0 + absl::Seconds(599));
  EXPECT_EQ(p.pool, 1);
  EXPECT_THAT(p.reason, HasSubstr("avoided ap-south-1"));
  EXPECT_EQ(policy.Place(PlacementRequest{}, ThreePools(), t0 + absl::Seconds(600)).pool, 2);
}

TEST(PlacementPolicyTest, OnDemandNeverUsesSpotAndRejectsWhatDoesNotFit) {
  PlacementPolicy policy({PlacementOptions::Mode::kOnDemand, 600});
  EXPECT_EQ(policy.Place(PlacementRequest{}, ThreePools(), absl::UnixEpoch()).pool, 0);
  PlacementRequest big;
  big.gpus = 8;
  Placement p = policy.Place(big, ThreePools(), absl::UnixEpoch());
  EXPECT_FALSE(p.placed());
  EXPECT_THAT(p.reason, HasSubstr("no pool with a free slot fits 8 GPUs"));
}

TEST(PlacementPolicyTest, PrepaidReservedCapacityBeatsOnDemand) {
  std::vector<PoolCandidate> pools = ThreePools();
  pools.push_back(
      {"res", "eu-west-1", Market::kReserved, 1.716 / 3600, pools[0].instance, 2, true});
  PlacementRequest top;
  top.top_rung = true;
  PlacementPolicy policy({PlacementOptions::Mode::kMixed, 600});
  EXPECT_EQ(policy.Place(top, pools, absl::UnixEpoch()).pool, 3);
  // Paid-for capacity comes first even for jobs that would go to spot...
  EXPECT_EQ(policy.Place(PlacementRequest{}, pools, absl::UnixEpoch()).pool, 3);
  // ...but a reservation not yet made is priced like any pool: spot is cheaper.
  pools[3].prepaid_idle = false;
  EXPECT_EQ(policy.Place(PlacementRequest{}, pools, absl::UnixEpoch()).pool, 2);
}

TEST(AutoscalerTest, GrowsToQueueLengthWithinOneTickUpToMax) {
  Autoscaler scaler(AutoscalerOptions{300, 5});
  std::vector<ScalingPool> pools = {{0, 32, 1, 0, 40, false}, {2, 4, 0, 0, 0, false}};
  ScalingPlan plan = scaler.Plan(absl::UnixEpoch(), pools, {});
  EXPECT_EQ(plan.launch[0], 31);        // 40 waiting, capped at 32 live
  EXPECT_EQ(plan.launch[1], 2);         // min_instances
  pools[0] = {0, 32, 10, 6, 8, false};  // 8 waiting, 6 already booting
  EXPECT_EQ(scaler.Plan(absl::UnixEpoch(), pools, {}).launch[0], 2);
}

TEST(AutoscalerTest, ShrinksIdleInstancesOnlyNearTheEndOfTheirPaidIncrement) {
  Autoscaler scaler(AutoscalerOptions{300, 5});
  const absl::Time t0 = absl::FromUnixSeconds(0);
  std::vector<ScalingPool> pools = {{0, 8, 2, 0, 0, false}};
  // Hourly billing: launched at 0, idle since 100; the idle timeout passes at 400 but the
  // hour is paid, so it may go only from 3595.
  ScalingInstance hourly{1, 0, true, t0 + absl::Seconds(100), t0, BillingTerms{1, 3600, 0}};
  ScalingInstance busy{2, 0, false, t0, t0, BillingTerms{1, 1, 60}};
  EXPECT_THAT(scaler.Plan(t0 + absl::Seconds(400), pools, {hourly, busy}).terminate, IsEmpty());
  EXPECT_EQ(scaler.ReleaseAt(hourly, t0 + absl::Seconds(400)), t0 + absl::Seconds(3595));
  EXPECT_THAT(scaler.Plan(t0 + absl::Seconds(3595), pools, {hourly, busy}).terminate,
              ::testing::ElementsAre(1));
  // Per-second billing past the minimum: released as soon as the idle timeout passes.
  ScalingInstance per_second{3, 0, true, t0 + absl::Seconds(100), t0, BillingTerms{1, 1, 60}};
  EXPECT_EQ(scaler.ReleaseAt(per_second, t0), t0 + absl::Seconds(400));
  // Never below min_instances, never with jobs waiting.
  pools[0].min_instances = 2;
  EXPECT_THAT(scaler.Plan(t0 + absl::Seconds(4000), pools, {per_second}).terminate, IsEmpty());
  pools[0].min_instances = 0;
  pools[0].waiting = 1;
  EXPECT_THAT(scaler.Plan(t0 + absl::Seconds(4000), pools, {per_second}).terminate, IsEmpty());
}

TEST(InterruptionSamplerTest, RateAndNoticeProbabilityMatchTheModel) {
  InterruptionSampler sampler(42);
  InterruptionModel model{0.2, 30, 0.75};
  double sum = 0;
  int notices = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    Interruption x = sampler.Sample(model);
    sum += x.after_seconds;
    notices += x.notice;
    if (x.notice) {
      EXPECT_LE(x.notice_seconds, 30);
    }
  }
  EXPECT_NEAR(sum / n / 86400, 1 / 0.2, 0.15);  // mean time to interruption: 5 days
  EXPECT_NEAR(notices / double(n), 0.75, 0.02);
  EXPECT_TRUE(std::isinf(sampler.Sample(InterruptionModel{0, 120, 1}).after_seconds));
}

// Under --time-scale the market's time shrinks, but a notice stays long enough to act on.
TEST(InterruptionSamplerTest, AScaledNoticeIsNeverShorterThanHalfASecond) {
  const Interruption noticed{36000, true, 120};
  const Interruption scaled = Scaled(noticed, 2e-5);
  EXPECT_DOUBLE_EQ(scaled.after_seconds, 0.72);
  EXPECT_TRUE(scaled.notice);
  EXPECT_DOUBLE_EQ(scaled.notice_seconds, kMinScaledNoticeSeconds);  // 120 s x 2e-5 is 2.4 ms
  EXPECT_DOUBLE_EQ(Scaled(noticed, 0.01).notice_seconds, 1.2);       // long enough already
  EXPECT_DOUBLE_EQ(Scaled(noticed, 1).after_seconds, 36000);
  const Interruption unannounced = Scaled(Interruption{36000, false, 0}, 2e-5);
  EXPECT_FALSE(unannounced.notice);
  EXPECT_EQ(unannounced.notice_seconds, 0);  // none is made up
}

}  // namespace
}  // namespace sextant
