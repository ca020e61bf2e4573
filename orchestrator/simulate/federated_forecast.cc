#include "orchestrator/simulate/federated_forecast.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "aggregator/tier_settings.h"
#include "common/status_macros.h"
#include "orchestrator/cost/federated_placement.h"
#include "orchestrator/cost/interruption_sampler.h"
#include "orchestrator/cost/ledger.h"

namespace sextant {
namespace {

constexpr double kFraming = 1.0015;  // message bytes over payload bytes, as measured

// One participant's expected bill if it runs `seconds` from the start.
double Bill(const PoolOffer& pool, double seconds) {
  return Ledger::LaunchCost(pool.offer.billing, seconds);
}

// One instance of a participant: from its start to its end (seconds from the run's start;
// infinity while it runs), on its pool.
struct Instance {
  const PoolOffer* pool;
  double start = 0;
  double end = std::numeric_limits<double>::infinity();
};

// The instances a run of this seed starts within `seconds`, as its participants draw them
// (participants.h): all start at 0, in launch order (every region's aggregator, then every
// region's clients), each spot one drawing its interruption from SpotMarketSeed at its start;
// one taken back is replaced at once by a new instance, which draws next. *expected gets the
// mean number taken back over all seeds (each spot participant's rate over `seconds`).
std::vector<Instance> SpotReplay(const v1::Federation& fed, const FederatedPlacement& placement,
                                 double seconds, double time_scale, double* expected) {
  std::vector<Instance> out;
  for (const v1::FederatedRegion& r : fed.regions()) {
    out.push_back({&placement.For(r.name(), /*aggregator=*/true)});
  }
  for (const v1::FederatedRegion& r : fed.regions()) {
    for (int i = 0; i < r.clients(); ++i) {
      out.push_back({&placement.For(r.name(), /*aggregator=*/false)});
    }
  }
  InterruptionSampler market(SpotMarketSeed(fed, 0));
  auto draw = [&](Instance& i) {
    if (i.pool->offer.market != Market::kSpot) return;
    i.end = i.start + Scaled(market.Sample(i.pool->offer.interruption), time_scale).after_seconds;
  };
  *expected = 0;
  for (Instance& i : out) {
    draw(i);
    if (i.pool->offer.market == Market::kSpot) {
      *expected += i.pool->offer.interruption.rate_per_day * seconds / (86400.0 * time_scale);
    }
  }
  // Interruptions in the order they come, each starting its replacement (appended: `live`
  // indexes the instances that run now, one per participant).
  std::vector<size_t> live(out.size());
  for (size_t k = 0; k < live.size(); ++k) live[k] = k;
  for (;;) {
    size_t next = live.size();
    for (size_t k = 0; k < live.size(); ++k) {
      if (out[live[k]].end < seconds &&
          (next == live.size() || out[live[k]].end < out[live[next]].end)) {
        next = k;
      }
    }
    if (next == live.size()) break;
    Instance replacement{out[live[next]].pool, out[live[next]].end};
    draw(replacement);
    live[next] = out.size();
    out.push_back(replacement);
  }
  return out;
}

}  // namespace

absl::StatusOr<FederatedForecast> ForecastFederatedRun(const v1::ExperimentSpec& spec,
                                                       const Catalog& catalog, int64_t parameters,
                                                       double time_scale,
                                                       const RunTiming* measured) {
  SEXTANT_ASSIGN_OR_RETURN(FederatedPlacement placement, FederatedPlacement::Create(spec, catalog));
  const v1::Federation& fed = spec.federation();
  const v1::Simulation& sim = spec.simulate();
  // The run's start-up (the whole fleet's), and one replacement's boot: a measured run says
  // the former; the simulate: block's boot_time, one instance's launch to ready, the latter
  // when it is given (the measured start-up stands in for it otherwise).
  const double guessed_boot = sim.has_boot_seconds() ? sim.boot_seconds() : 10;
  const double startup = measured != nullptr ? measured->startup_seconds : guessed_boot;
  const double boot =
      measured != nullptr && !sim.has_boot_seconds() ? measured->startup_seconds : guessed_boot;
  const double client = sim.client_seconds() > 0 ? sim.client_seconds() : 5;
  const double mbps = sim.link_mbps() > 0 ? sim.link_mbps() : 100;
  const bool int8_up = fed.update_compression() == "int8" && !fed.secure_aggregation();
  const double down = 4.0 * static_cast<double>(parameters) * kFraming;
  const double up = (int8_up ? 1.0 : 4.0) * static_cast<double>(parameters) * kFraming;

  FederatedForecast f;
  double slowest_link = 0, transfer_per_round = 0;
  for (const v1::FederatedRegion& r : fed.regions()) {
    if (r.name() == placement.global_region()) continue;
    slowest_link = std::max(slowest_link, (down + up) * 8 / (mbps * 1e6));
    const FederatedPlacement::TransferPrice price =
        placement.TransferPerByte(r.name()).value_or(FederatedPlacement::TransferPrice{});
    transfer_per_round += down * price.down + up * price.up;
    f.bytes_per_round += static_cast<int64_t>(down + up);
  }
  const double round_seconds =
      measured != nullptr ? measured->round_seconds : client + slowest_link;

  // A round whose participant the market takes back waits for its replacement to start (as
  // long as any participant's start-up) or until its deadline, whichever comes first. The
  // market's draws do not depend on the rounds: draw them over the longest the run can last
  // (every round waiting), then lay the rounds over them.
  const double wait = std::min(StageTimeoutSeconds(fed), boot);
  const double horizon = startup + static_cast<double>(fed.rounds()) * (round_seconds + wait);
  const std::vector<Instance> drawn =
      SpotReplay(fed, placement, horizon, time_scale, &f.expected_preemptions);
  std::vector<double> closes;
  std::vector<bool> waited;
  double now = startup;
  for (int64_t round = 1; round <= fed.rounds(); ++round) {
    const double open = now;
    now += round_seconds;
    // One wait a round: measured against live runs (bench/federated/cost), waiting again for
    // each later stage's losses forecast storms the live runs did not have.
    bool waits = false;
    for (const Instance& i : drawn) waits = waits || (i.end > open && i.end <= now);
    if (waits) now += wait;
    closes.push_back(now);
    waited.push_back(waits);
  }
  f.wall_seconds = now;
  std::vector<Instance> instances;
  for (const Instance& i : drawn) {
    if (i.start < f.wall_seconds) instances.push_back(i);
  }
  f.expected_preemptions *= f.wall_seconds / horizon;
  // The bills so far at `t` seconds: every instance from its start to its end or t.
  auto compute_until = [&](double t) {
    double sum = 0;
    for (const Instance& i : instances) {
      if (i.start < t) sum += Bill(*i.pool, std::min(t, i.end) - i.start);
    }
    return sum;
  };
  double previous = 0, cumulative = 0;
  const double cap = spec.budget().has_max_cost() ? spec.budget().max_cost() : -1;
  for (int64_t round = 1; round <= fed.rounds(); ++round) {
    RoundForecast r;
    r.round = round;
    r.close_seconds = closes[static_cast<size_t>(round - 1)];
    r.waited_out = waited[static_cast<size_t>(round - 1)];
    const double compute = compute_until(r.close_seconds);
    r.compute = compute - previous;
    r.transfer = transfer_per_round;
    previous = compute;
    cumulative += r.compute + r.transfer;
    if (cap < 0 || cumulative <= cap) f.rounds_within_budget = round;
    f.rounds.push_back(r);
  }
  for (const Instance& i : instances) {
    const double bill = Bill(*i.pool, std::min(f.wall_seconds, i.end) - i.start);
    f.by_pool[i.pool->owner.pool] += bill;
    f.compute += bill;
    if (i.end < f.wall_seconds) ++f.preemptions;
  }
  f.transfer = transfer_per_round * static_cast<double>(fed.rounds());
  f.total = f.compute + f.transfer;
  return f;
}

}  // namespace sextant
