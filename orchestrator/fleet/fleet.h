#ifndef SEXTANT_ORCHESTRATOR_FLEET_FLEET_H_
#define SEXTANT_ORCHESTRATOR_FLEET_FLEET_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "orchestrator/core/fleet_meta.h"
#include "orchestrator/core/run_core.h"
#include "orchestrator/core/store.h"
#include "orchestrator/cost/autoscaler.h"
#include "orchestrator/cost/budget_guard.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/interruption_sampler.h"
#include "orchestrator/cost/ledger.h"
#include "orchestrator/cost/placement_policy.h"
#include "orchestrator/fleet/provider.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

struct FleetOptions {
  std::string connect;            // HOST:PORT the workers dial; required
  std::string logs_dir;           // worker logs go to LOGS_DIR/worker-TOKEN.log; required
  WorkerCredentials credentials;  // every InstanceRequest's; default: plaintext
  // Multiplies the drawn spot interruption times and notices, so that a test sees the
  // market's behaviour in seconds; default 1.
  double time_scale = 1;
  // Seconds projected for running trials to checkpoint and stop at the cap, per live
  // instance; also the grace a worker on a non-spot instance gives its trial after the notice
  // (its --preempt-notice). Default 10.
  double wind_down_seconds = 10;
  // A resumed run: the bills of its earlier sessions (the store's cost rows). They are kept
  // in the store, count against budget.max_cost, and trial costs add up across sessions.
  // Default none.
  std::vector<CostRow> prior_costs;
  // Seconds from the run's first start to this fleet's start: added to the times of new
  // bills, so that one run's cost rows share one time origin. Default 0.
  double epoch_offset_seconds = 0;
  // A resumed run: each pool's counters from its earlier sessions (meta "fleet"), which this
  // session's counts add to. Default none.
  std::map<std::string, FleetPoolStats> prior_pools;
  uint64_t seed = 1;            // spot interruptions; default 1
  int max_launch_failures = 5;  // a pool failing this many launches in a row is given up; default 5
  double launch_backoff_seconds = 1;  // doubled after each failure, at most 60 s; default 1
};

// The dispatcher's state as the fleet needs it, read under the run core's lock.
struct FleetView {
  int demand = 0;                      // trials that would start now with free workers
  int top_rung_demand = 0;             // of those, top-rung jobs kept off the barred pools
  std::map<int64_t, int64_t> running;  // worker id -> trial id
  struct Worker {
    std::string region, pool, launch_token;
  };
  // Registered workers: at least those registered since the last tick (the fleet binds each
  // worker once; the ones it has seen are skipped).
  std::map<int64_t, Worker> workers;
};

// What the fleet did in a tick, for the event log and the dispatcher.
struct FleetTick {
  struct Event {
    std::string kind;
    int64_t trial = 0;
    std::string message;
  };
  std::vector<Event> events;
  std::vector<int64_t> retire;  // workers that must get no more work (their instance goes)
  // Workers whose instance is gone (it died, or the market took it back): whatever trial ran
  // there is lost now (Dispatcher::WorkerLost), not when its lease would lapse.
  std::vector<int64_t> lost;
  bool hold = false;  // the budget pays for no new work: lease nothing
};

// The live instances of a run: launches them through a Provider, charges each per second on
// the Ledger from launch to termination (idle time included, reserved capacity whole),
// attributes cost to the trials that run on them, refuses any launch the BudgetGuard does not
// allow, grows pools from the queue with the Autoscaler (placing demand with the
// PlacementPolicy) and shrinks idle ones, and injects spot interruptions drawn from the
// catalog's model. Not thread-safe; runs on the orchestrator loop.
class Fleet {
 public:
  // InvalidArgument when the spec has no pools or a pool names no catalog offer.
  // provider and clock are not owned and must outlive the fleet.
  static absl::StatusOr<std::unique_ptr<Fleet>> Create(const v1::ExperimentSpec& spec,
                                                       Catalog catalog, Provider* provider,
                                                       const Clock* clock, FleetOptions options);

  // One round: binds newly registered workers to instances (adopting hand-started ones of a
  // static provider), moves attribution, polls instances, injects due interruptions, checks
  // the budget, then scales. Errors from the provider become events, never a failed tick.
  FleetTick Tick(const FleetView& view);

  // The pools placement keeps top-rung jobs (and final evaluations) off: spot pools when the
  // policy avoids spot for the top rung and a fitting non-spot pool exists. *why (not null)
  // says so for the event log. Empty under policies that allow the top rung anywhere.
  std::set<std::string> PoolsOffTheTopRung(std::string* why) const;

  // True once committed spend plus the projected wind-down of live instances has reached
  // max_cost: the run must stop. Sticky.
  bool exhausted() const { return exhausted_; }
  // Why waiting work can never run: no instance is live or starting and every pool is given up
  // (kLaunchFailed) or the budget refuses every launch (kBudget). kNone when it can.
  using StuckOn = ::sextant::StuckOn;
  // Stuck()'s reason, and *why in words (left alone with kNone).
  StuckOn Stuck(std::string* why) const;

  // The budget is spent: every instance that runs a trial gets the preemption-style notice
  // (the provider's Interrupt with notice: the worker has its trial write its checkpoint, hands
  // it back and exits), and idle ones are terminated. Spot interruptions are no longer
  // injected. Returns the number of instances told to stop.
  int NoticeAll();
  // Asks every live instance to stop. Returns the number still live (poll with Reap).
  int TerminateAll();
  // Polls terminating instances, ending their bills when they are gone; after `force`, kills
  // those left (provider Interrupt without notice) and ends their bills now. Returns the
  // number still live.
  int Reap(bool force);

  // Rewrites the store's cost rows from the ledger (same rows as `sextant simulate`), and the
  // per-pool counts as meta "fleet". Runs in the caller's transaction.
  absl::Status WriteCosts(Store* store) const;

  // Everything owed now, earlier sessions of a resumed run included.
  double committed() const { return prior_committed_ + ledger_.Committed(); }
  // A trial's share of the bills so far, every attempt and earlier session counted: the
  // seconds it ran times its instances' rates.
  double TrialCost(int64_t trial) const;
  // The worker started running `trial` now (0: it finished its trial): its instance's time is
  // charged to the trial from now on (DispatchRules::worker_trial). A worker not bound to
  // a live instance yet is picked up by the next Tick.
  void OnWorkerTrial(int64_t worker, int64_t trial);
  // The registered workers of instances that are up: bound to an instance that is neither
  // terminating nor gone (retired workers are not among them).
  std::set<int64_t> LiveWorkers() const;
  std::vector<FleetPoolStats> pool_stats() const;
  const Ledger& ledger() const { return ledger_; }

 private:
  struct Pool {
    v1::Pool spec;
    Offer offer;
    InstanceType type;
    CostOwner owner;
    int64_t reservation = 0;  // ledger id of the current reservation (reserved pools)
    absl::Time reservation_end;
    int failures = 0;  // launch failures in a row
    absl::Time retry_at = absl::InfinitePast();
    bool given_up = false;
    FleetPoolStats stats;
    // What acting on the pool commits: a reserved pool's whole reservation (none while one
    // runs), else a new instance's minimum bill and its own wind-down.
    double ActionCost(double wind_down_seconds) const;
  };
  struct Instance {
    int pool = 0;
    std::string token, handle;
    int64_t ledger_id = 0;
    absl::Time launched;
    int64_t worker = 0;  // 0 until its worker registers
    int64_t trial = 0;   // running now
    absl::Time idle_since;
    bool terminating = false;
    bool billed_off = false;                           // the ledger stopped charging it
    absl::Time interrupt_at = absl::InfiniteFuture();  // spot: when the market takes it
    absl::Time notice_at = absl::InfiniteFuture();
    bool noticed = false;
    double notice_seconds = 0;
  };

  Fleet(const Clock* clock, FleetOptions options, std::optional<double> max_cost,
        PlacementOptions placement, AutoscalerOptions autoscaler, Provider* provider);

  void Bind(const FleetView& view, FleetTick& tick);
  void Attribute(const FleetView& view);
  // inst runs `trial` (0: none) from now on.
  void Assign(Instance& inst, int64_t trial);
  void PollInstances(FleetTick& tick);
  void Interrupt(FleetTick& tick);
  void CheckBudget(FleetTick& tick);
  void Scale(const FleetView& view, FleetTick& tick);
  // Committed spend and projected wind-down (see CheckBudget) during one round's launches.
  struct BudgetSnapshot {
    double committed = 0;
    double wind_down = 0;
  };
  void Launch(int pool, FleetTick& tick, BudgetSnapshot& budget);
  void Release(Instance& inst, FleetTick& tick, const std::string& why);
  void EndBill(Instance& inst);
  void Renew(FleetTick& tick);
  double WindDown() const;
  std::vector<PoolCandidate> Candidates() const;

  const Clock* clock_;
  FleetOptions options_;
  Provider* provider_;
  Ledger ledger_;
  BudgetGuard guard_;
  PlacementPolicy placement_;
  Autoscaler autoscaler_;
  InterruptionSampler sampler_;
  PlacementRequest request_;
  std::vector<Pool> pools_;
  std::vector<Instance> instances_;
  std::map<int64_t, double> prior_trial_cost_;  // earlier sessions' cost of each trial
  std::map<int64_t, size_t> by_worker_;         // worker id -> instances_ index
  int64_t next_token_ = 1;
  bool exhausted_ = false;
  bool stopping_ = false;                   // NoticeAll: no more interruptions are injected
  double prior_committed_ = 0;              // bills of earlier sessions (options_.prior_costs)
  bool launch_refused_ = false;             // the budget refused the last launch wanted
  std::map<int, std::string> last_reason_;  // pool -> last placement reason logged
  std::string last_refusal_;
  absl::Time last_poll_ = absl::InfinitePast();
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FLEET_FLEET_H_
