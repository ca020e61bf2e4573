#include "orchestrator/fleet/fleet_driver.h"

#include <set>
#include <utility>

#include "common/status_macros.h"

namespace sextant {

FleetDriver::FleetDriver(Fleet* fleet, Store* store, const Clock* clock, FleetDriverOptions options)
    : fleet_(fleet), store_(store), clock_(clock), options_(options) {}

void FleetDriver::Connect(Dispatcher& d) {
  d.rules().top_rung_barred = fleet_->PoolsOffTheTopRung(&d.rules().top_rung_why);
  d.rules().trial_cost = [fleet = fleet_](int64_t trial) { return fleet->TrialCost(trial); };
  // For cost_aware sampling's budget share, read at every new trial: priced at most once a
  // second (it prices every live instance).
  d.rules().spend = [fleet = fleet_, clock = clock_, at = absl::InfinitePast(),
                     spend = 0.0]() mutable {
    const absl::Time now = clock->Now();
    if (now - at >= absl::Seconds(1)) {
      spend = fleet->committed();
      at = now;
    }
    return spend;
  };
  d.rules().worker_trial = [fleet = fleet_](int64_t worker, int64_t trial) {
    fleet->OnWorkerTrial(worker, trial);
  };
}

absl::StatusOr<PoolsRound> FleetDriver::Round(Dispatcher& d) {
  const absl::Time now = clock_->Now();
  FleetView view;
  view.demand = d.Demand();
  view.top_rung_demand = d.TopRungDemand();
  view.running = d.trials().RunningByWorker();
  // Worker ids only grow, and the fleet binds each worker once: hand it the new ones.
  const auto& workers = d.roster().workers();
  for (auto it = workers.upper_bound(last_worker_); it != workers.end(); ++it) {
    view.workers[it->first] = {it->second.region, it->second.pool, it->second.launch_token};
    last_worker_ = it->first;
  }
  FleetTick tick = fleet_->Tick(view);
  d.SetHold(tick.hold || fleet_->exhausted());
  for (int64_t w : tick.retire) d.roster().Retire(w);
  for (int64_t w : tick.lost)
    SEXTANT_RETURN_IF_ERROR(d.WorkerLost(w, "its instance is gone").status());
  const bool periodic = options_.cost_write_period != absl::InfiniteDuration() &&
                        now - last_cost_write_ >= options_.cost_write_period;
  const bool on_events =
      options_.cost_write_period != absl::InfiniteDuration() && !tick.events.empty();
  SEXTANT_RETURN_IF_ERROR(WithinTransaction(store_, [&]() -> absl::Status {
    for (const FleetTick::Event& e : tick.events) {
      SEXTANT_RETURN_IF_ERROR(
          store_->AddEvent(absl::ToUnixMicros(now) / 1e6, e.kind, e.trial, e.message));
    }
    if (!periodic && !on_events) return absl::OkStatus();
    last_cost_write_ = now;
    return fleet_->WriteCosts(store_);
  }));
  PoolsRound r;
  r.exhausted = fleet_->exhausted();
  if (!r.exhausted && view.demand > 0) r.stuck_on = fleet_->Stuck(&r.stuck);
  return r;
}

absl::Status FleetDriver::WriteCosts() {
  SEXTANT_RETURN_IF_ERROR(
      WithinTransaction(store_, [&]() -> absl::Status { return fleet_->WriteCosts(store_); }));
  last_cost_write_ = clock_->Now();
  return absl::OkStatus();
}

}  // namespace sextant
