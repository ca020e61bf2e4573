#include "orchestrator/simulate/federated_forecast.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/simulate/run_timing.h"

namespace sextant {
namespace {

// Regions east (global) and west; `big` at $1/s on-demand and $0.25/s spot (taken back 8640
// times a day, every 10 s), billed per second with a 2 s minimum; $0.1/GB between them.
Catalog TestCatalog() {
  std::vector<CatalogError> errors;
  Catalog c = Catalog::Parse(R"(
regions: [east, west]
instances: {big: {gpus: 1, gpu_memory_gb: 80, cpus: 8}}
billing: {increment: 1s, minimum: 2s}
offers:
  - {region: east, instance: big, market: on_demand, price_per_second: 1}
  - {region: west, instance: big, market: on_demand, price_per_second: 1}
  - {region: west, instance: big, market: spot, price_per_second: 0.25,
     interruption: {rate_per_day: 8640}}
transfer:
  pairs: [{between: [east, west], per_gb: 0.1}]
)",
                             &errors);
  EXPECT_TRUE(errors.empty()) << errors[0].message;
  return c;
}

v1::ExperimentSpec Spec(v1::Pool::Market west_market) {
  v1::ExperimentSpec spec;
  v1::Federation* f = spec.mutable_federation();
  f->set_rounds(4);
  for (const char* name : {"east", "west"}) {
    v1::FederatedRegion* r = f->add_regions();
    r->set_name(name);
    r->set_clients(2);
    v1::Pool* p = spec.mutable_resources()->add_pools();
    p->set_name(std::string(name) + "-pool");
    p->set_region(name);
    p->set_instance("big");
    p->set_market(std::string(name) == "west" ? west_market : v1::Pool::ON_DEMAND);
    p->set_hosts("any");
  }
  spec.mutable_simulate()->set_boot_seconds(10);
  spec.mutable_simulate()->set_client_seconds(4);
  spec.mutable_simulate()->set_link_mbps(8);  // 1 MB/s
  return spec;
}

TEST(FederatedForecastTest, RoundsCostTheirInstancesSecondsAndTheirBytesBetweenRegions) {
  // 250,000 weights: 1 MB down and 1 MB up (plus framing) to west each round, 2 s at 1 MB/s.
  absl::StatusOr<FederatedForecast> f =
      ForecastFederatedRun(Spec(v1::Pool::ON_DEMAND), TestCatalog(), 250'000);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->rounds.size(), 4u);
  const double bytes = 2 * 4 * 250'000 * 1.0015;
  EXPECT_EQ(f->bytes_per_round, static_cast<int64_t>(bytes));
  const double round_seconds = 4 + bytes * 8 / 8e6;  // 6.006 s
  EXPECT_NEAR(f->rounds[0].close_seconds, 10 + round_seconds, 1e-9);
  EXPECT_NEAR(f->wall_seconds, 10 + 4 * round_seconds, 1e-9);
  // Six participants at $1/s, billed in whole seconds: round 1 to 17 s, round 2 to 23 s, ...
  EXPECT_DOUBLE_EQ(f->rounds[0].compute, 6 * 17.0);
  EXPECT_DOUBLE_EQ(f->rounds[1].compute, 6 * 6.0);
  EXPECT_NEAR(f->rounds[0].transfer, bytes * 0.1 / 1e9, 1e-12);
  EXPECT_DOUBLE_EQ(f->compute, 6 * std::ceil(f->wall_seconds));
  EXPECT_NEAR(f->total, f->compute + 4 * f->rounds[0].transfer, 1e-9);
  EXPECT_EQ(f->rounds_within_budget, 4);
  EXPECT_DOUBLE_EQ(f->by_pool.at("east-pool"), 3 * std::ceil(f->wall_seconds));

  // A budget the third round would pass stops the run after the second.
  v1::ExperimentSpec capped = Spec(v1::Pool::ON_DEMAND);
  capped.mutable_budget()->set_max_cost(6 * 26.0);  // round 2 closes at 23 s, round 3 at 29 s
  EXPECT_EQ(ForecastFederatedRun(capped, TestCatalog(), 250'000)->rounds_within_budget, 2);
}

TEST(FederatedForecastTest, SpotIsCheaperAndEachReplacementItsMarketTakesBackPaysItsOwnBill) {
  // A round that loses a participant waits 0.5 s for it (its deadline).
  auto spec = [](v1::Pool::Market market, uint64_t seed) {
    v1::ExperimentSpec s = Spec(market);
    s.mutable_federation()->set_round_deadline_seconds(0.5);
    s.mutable_federation()->set_seed(seed);
    return s;
  };
  absl::StatusOr<FederatedForecast> od =
      ForecastFederatedRun(spec(v1::Pool::ON_DEMAND, 0), TestCatalog(), 250'000);
  absl::StatusOr<FederatedForecast> spot =
      ForecastFederatedRun(spec(v1::Pool::SPOT, 0), TestCatalog(), 250'000);
  ASSERT_TRUE(od.ok() && spot.ok());
  // Three west participants for the run's 34-36 s, each taken back every 10 s on average.
  EXPECT_NEAR(spot->expected_preemptions, 3 * spot->wall_seconds / 10, 1e-9);
  // This seed's draws: west's 3 participants and their replacements cover the run's seconds
  // at $0.25/s, each instance billed in whole seconds with a 2 s minimum of its own.
  const double seconds = 3 * spot->wall_seconds;
  const double instances = 3 + static_cast<double>(spot->preemptions);
  EXPECT_GE(spot->by_pool.at("west-pool"), 0.25 * seconds);
  EXPECT_LE(spot->by_pool.at("west-pool"), 0.25 * (seconds + 2 * instances));
  double rounds = 0;
  for (const RoundForecast& r : spot->rounds) rounds += r.compute;
  EXPECT_NEAR(rounds, spot->compute, 1e-9) << "every instance's bill falls in some round";
  // The draws are the seed's: the same seed draws the same, and over many seeds the count
  // follows the market's rate over each seed's own wall time (which the draws lengthen).
  EXPECT_EQ(ForecastFederatedRun(spec(v1::Pool::SPOT, 0), TestCatalog(), 250'000)->preemptions,
            spot->preemptions);
  double sum = 0, expected = 0;
  const int kSeeds = 400;
  for (int seed = 1; seed <= kSeeds; ++seed) {
    absl::StatusOr<FederatedForecast> f =
        ForecastFederatedRun(spec(v1::Pool::SPOT, seed), TestCatalog(), 250'000);
    sum += static_cast<double>(f->preemptions);
    expected += f->expected_preemptions;
  }
  // Poisson with mean about 10.5 per seed: the mean of 400 has a standard error of 0.16.
  EXPECT_NEAR(sum / kSeeds, expected / kSeeds, 0.65);
  EXPECT_LT(spot->total, od->total);
  // The global region's own link is free; with west global, east pays the bytes instead.
  v1::ExperimentSpec west_global = Spec(v1::Pool::ON_DEMAND);
  west_global.mutable_federation()->set_global_region("west");
  EXPECT_NEAR(ForecastFederatedRun(west_global, TestCatalog(), 250'000)->transfer, od->transfer,
              1e-12);
}

TEST(FederatedForecastTest, ARunsMeasuredTimingReplacesTheSimulateBlocksGuesses) {
  // A pilot that started in 3 s and closed a round every 1.5 s: the forecast's rounds close
  // 1.5 s apart after 3 s, whatever simulate: says (10 s boot, 6 s rounds), links included.
  const RunTiming measured{/*startup_seconds=*/3, /*round_seconds=*/1.5, /*gaps=*/3};
  absl::StatusOr<FederatedForecast> f = ForecastFederatedRun(
      Spec(v1::Pool::ON_DEMAND), TestCatalog(), 250'000, /*time_scale=*/1, &measured);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_DOUBLE_EQ(f->rounds[0].close_seconds, 4.5);
  EXPECT_DOUBLE_EQ(f->rounds[3].close_seconds, 9);
  EXPECT_DOUBLE_EQ(f->wall_seconds, 9);
  EXPECT_DOUBLE_EQ(f->compute, 6 * 9.0);  // six participants for 9 whole seconds at $1/s
}

TEST(FederatedForecastTest, ARoundThatLosesAParticipantWaitsForItsReplacementOrItsDeadline) {
  // The run starts in 3 s and rounds take 1.5 s; west's participants are taken back every 10 s
  // on average, so over a run of tens of seconds some rounds lose one. Such a round waits for
  // the replacement to boot or its deadline, whichever is sooner; the others take 1.5 s. The
  // boot is the simulate: block's boot_time (one instance's) when given, else the start-up.
  const RunTiming measured{/*startup_seconds=*/3, /*round_seconds=*/1.5, /*gaps=*/3};
  for (const auto& [deadline, boot] :
       std::vector<std::pair<double, double>>{{4, 0}, {2, 0}, {4, 1}}) {
    const double wait = std::min(deadline, boot > 0 ? boot : 3.0);
    v1::ExperimentSpec spec = Spec(v1::Pool::SPOT);
    if (boot > 0) {
      spec.mutable_simulate()->set_boot_seconds(boot);
    } else {
      spec.mutable_simulate()->clear_boot_seconds();
    }
    spec.mutable_federation()->set_round_deadline_seconds(deadline);
    spec.mutable_federation()->set_rounds(20);
    absl::StatusOr<FederatedForecast> f =
        ForecastFederatedRun(spec, TestCatalog(), 250'000, /*time_scale=*/1, &measured);
    ASSERT_TRUE(f.ok()) << f.status();
    int waited = 0;
    double open = 3;
    for (const RoundForecast& r : f->rounds) {
      EXPECT_NEAR(r.close_seconds - open, r.waited_out ? 1.5 + wait : 1.5, 1e-9)
          << "round " << r.round << ", deadline " << deadline;
      waited += r.waited_out;
      open = r.close_seconds;
    }
    EXPECT_GE(waited, 1);
    EXPECT_LE(waited, f->preemptions) << "a round waits only where some participant went";
    EXPECT_DOUBLE_EQ(f->wall_seconds, 3 + 20 * 1.5 + wait * waited);
  }
  // On-demand, no round waits.
  v1::ExperimentSpec spec = Spec(v1::Pool::ON_DEMAND);
  absl::StatusOr<FederatedForecast> f =
      ForecastFederatedRun(spec, TestCatalog(), 250'000, 1, &measured);
  ASSERT_TRUE(f.ok());
  for (const RoundForecast& r : f->rounds) EXPECT_FALSE(r.waited_out) << r.round;
}

}  // namespace
}  // namespace sextant
