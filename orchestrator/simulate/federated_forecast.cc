#include "orchestrator/simulate/federated_forecast.h"

#include <algorithm>

#include "common/status_macros.h"
#include "orchestrator/cost/federated_placement.h"
#include "orchestrator/cost/ledger.h"

namespace sextant {
namespace {

constexpr double kFraming = 1.0015;  // message bytes over payload bytes, as measured

// One participant's expected bill if it runs `seconds` from the start.
double Bill(const PoolOffer& pool, double seconds) {
  return Ledger::LaunchCost(pool.offer.billing, seconds);
}

}  // namespace

absl::StatusOr<FederatedForecast> ForecastFederatedRun(const v1::ExperimentSpec& spec,
                                                       const Catalog& catalog, int64_t parameters,
                                                       double time_scale) {
  SEXTANT_ASSIGN_OR_RETURN(FederatedPlacement placement, FederatedPlacement::Create(spec, catalog));
  const v1::Federation& fed = spec.federation();
  const v1::Simulation& sim = spec.simulate();
  const double boot = sim.has_boot_seconds() ? sim.boot_seconds() : 10;
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
    transfer_per_round += (down + up) * placement.TransferPerByte(r.name()).value_or(0);
    f.bytes_per_round += static_cast<int64_t>(down + up);
  }
  const double round_seconds = client + slowest_link;

  // Each participant: its pool, and how many of it (a region's clients share one pool).
  struct Group {
    const PoolOffer* pool;
    int count;
  };
  std::vector<Group> groups;
  for (const v1::FederatedRegion& r : fed.regions()) {
    groups.push_back({&placement.For(r.name(), /*aggregator=*/true), 1});
    groups.push_back({&placement.For(r.name(), /*aggregator=*/false), r.clients()});
  }
  auto compute_until = [&](double seconds) {
    double sum = 0;
    for (const Group& g : groups) sum += g.count * Bill(*g.pool, seconds);
    return sum;
  };
  double previous = 0, cumulative = 0;
  const double cap = spec.budget().has_max_cost() ? spec.budget().max_cost() : -1;
  for (int64_t round = 1; round <= fed.rounds(); ++round) {
    RoundForecast r;
    r.round = round;
    r.close_seconds = boot + static_cast<double>(round) * round_seconds;
    const double compute = compute_until(r.close_seconds);
    r.compute = compute - previous;
    r.transfer = transfer_per_round;
    previous = compute;
    cumulative += r.compute + r.transfer;
    if (cap < 0 || cumulative <= cap) f.rounds_within_budget = round;
    f.rounds.push_back(r);
  }
  f.wall_seconds = boot + static_cast<double>(fed.rounds()) * round_seconds;
  // Spot: each expected interruption starts a new instance, which pays its minimum again.
  for (const Group& g : groups) {
    double bill = g.count * Bill(*g.pool, f.wall_seconds);
    if (g.pool->offer.market == Market::kSpot) {
      const double taken = g.count * g.pool->offer.interruption.rate_per_day * f.wall_seconds /
                           (86400.0 * time_scale);
      f.expected_preemptions += taken;
      bill += taken * Bill(*g.pool, 0);
    }
    f.by_pool[g.pool->owner.pool] += bill;
    f.compute += bill;
  }
  f.transfer = transfer_per_round * static_cast<double>(fed.rounds());
  f.total = f.compute + f.transfer;
  return f;
}

}  // namespace sextant
