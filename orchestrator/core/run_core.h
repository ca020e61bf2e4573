// The run core: one Dispatcher, the pools its instances come from, and the one lock over both.
// `sextant run` steps it on the real clock, with gRPC adapters (orchestrator/service/) in front
// of it; `sextant simulate` steps it on virtual time, with simulated workers calling it
// directly. Both end a run by the same policy: RunCore::Step.
#ifndef SEXTANT_ORCHESTRATOR_CORE_RUN_CORE_H_
#define SEXTANT_ORCHESTRATOR_CORE_RUN_CORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "orchestrator/core/dispatcher.h"
#include "orchestrator/core/store.h"
#include "sextant/v1/worker_service.pb.h"

namespace sextant {

// Why waiting work can never run on the pools.
enum class StuckOn {
  kNone,          // it can (or nothing waits)
  kLaunchFailed,  // every pool that could take it fails to launch
  kBudget,        // the cost budget pays for no instance that could take it
};

// What one round of the pools left.
struct PoolsRound {
  bool exhausted = false;  // budget.max_cost is spent: the run must wind down
  StuckOn stuck_on = StuckOn::kNone;
  std::string stuck;  // why, in words; empty when stuck_on is kNone
};

// The instances a run's trials run on (resources.pools): FleetDriver in orchestrator/fleet.
// The core calls it under its lock, beside the dispatcher it drives.
class Pools {
 public:
  virtual ~Pools() = default;
  // Gives the dispatcher the pools' rules (top-rung pools, trial costs, the spend).
  virtual void Connect(Dispatcher& d) = 0;
  // One round: the pools read the dispatcher's demand and workers, and their decisions (hold,
  // retired and lost workers, events, bills) go back to it and the store.
  virtual absl::StatusOr<PoolsRound> Round(Dispatcher& d) = 0;
  // The wind-down notice to every busy instance: checkpoint and hand the trial back.
  virtual void NoticeAll() = 0;
  // Stops every instance.
  virtual void TerminateAll() = 0;
  // Collects stopped instances (force: without waiting for them); returns those still going.
  virtual int Reap(bool force) = 0;
  // Writes the bills and pool counters to the store.
  virtual absl::Status WriteCosts() = 0;
  // The workers of live instances (not retired ones).
  virtual std::set<int64_t> LiveWorkers() const = 0;
  // The spend committed so far, in currency.
  virtual double committed() const = 0;
};

// How a run ends, as RunCore::Step decides it.
enum class RunEnd {
  kGoesOn,            // nothing ends it yet
  kCompleted,         // every trial finished (or the schedule did): COMPLETED
  kEpsilonExhausted,  // budget.max_epsilon allowed no more trials, and each has ended
  kOutOfBudget,       // budget.max_wall_time or budget.max_cost: wind down, BUDGET_EXHAUSTED
  kFailed,            // the failure policy stopped it (Dispatcher::FailureStop): FAILED
  kCannotRun,         // the pools cannot launch what waits: FAILED
};

// A step's verdict.
struct Ending {
  RunEnd end = RunEnd::kGoesOn;
  std::string why;    // for people; empty while the run goes on
  std::string raise;  // kOutOfBudget: the `sextant resume` flag that raises the spent budget
};

// Owns the dispatcher and the pools and serialises every call to them. Thread-safe: gRPC
// adapters call it from their threads while the run's loop steps it.
class RunCore {
 public:
  // start: when the run (this session) began, for budget.max_wall_time. clock (not owned) must
  // outlive the core.
  RunCore(std::unique_ptr<Dispatcher> dispatcher, const Clock* clock, absl::Time start);

  // Gives the run its pools (resources.pools), connected to the dispatcher at once.
  void AttachPools(std::unique_ptr<Pools> pools) ABSL_LOCKS_EXCLUDED(mu_);
  bool has_pools() ABSL_LOCKS_EXCLUDED(mu_);

  // The worker protocol (sextant.v1.WorkerService), as Dispatcher's.
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<v1::LeaseResponse> Lease(int64_t worker_id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<v1::TrialAction> Heartbeat(const v1::HeartbeatRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<v1::TrialAction> Report(const v1::ReportRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<v1::CompleteResponse> Complete(const v1::CompleteRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The ids of every worker registered so far.
  std::vector<int64_t> WorkerIds() ABSL_LOCKS_EXCLUDED(mu_);

  // Expires lapsed leases (Dispatcher::Tick).
  absl::Status ExpireLeases() ABSL_LOCKS_EXCLUDED(mu_);
  // ExpireLeases, then a round of the pools (none without pools).
  absl::StatusOr<PoolsRound> Round() ABSL_LOCKS_EXCLUDED(mu_);
  // Round, then after_round (when given, outside the lock: workers that act on the round, as
  // a simulation's idle workers ask for work), then the ending policy, in this order: the
  // failure policy (kFailed); every trial finished (kCompleted, or kEpsilonExhausted when
  // budget.max_epsilon held new trials back); budget.max_wall_time reached; budget.max_cost
  // spent, or too little left for any instance (kOutOfBudget); the pools cannot launch
  // (kCannotRun). An error from the round or after_round is returned as it is.
  absl::StatusOr<Ending> Step(const std::function<absl::Status()>& after_round = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Begins the wind-down of kOutOfBudget: nothing new starts, and running trials get the notice
  // to checkpoint and stop (through the pools for instances; the caller signals local workers).
  absl::Status BeginWindDown(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  // Records how the run ended. Trials still running are cancelled first unless the run ended
  // of itself (COMPLETED, EPSILON_EXHAUSTED).
  absl::Status End(v1::RunState state, const std::string& why = "") ABSL_LOCKS_EXCLUDED(mu_);

  // The pools' side of the end (no-ops without pools): stop every instance, collect them
  // (force: without waiting; returns those still going), and write the final bills.
  void TerminatePools() ABSL_LOCKS_EXCLUDED(mu_);
  int ReapPools(bool force) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status WritePoolCosts() ABSL_LOCKS_EXCLUDED(mu_);

  // The dispatcher's statistics, with the pools' committed spend.
  DispatchStats Stats() ABSL_LOCKS_EXCLUDED(mu_);
  bool Finished() ABSL_LOCKS_EXCLUDED(mu_);
  int running() ABSL_LOCKS_EXCLUDED(mu_);
  int64_t trial_count() ABSL_LOCKS_EXCLUDED(mu_);
  // A copy of trial id's row; nullopt when there is none.
  std::optional<TrialRow> Trial(int64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // The workers that can take a trial (with pools: those of live instances) and, of them,
  // those running one; nullopt without pools.
  std::optional<std::pair<int, int>> PoolWorkers() ABSL_LOCKS_EXCLUDED(mu_);
  const v1::ExperimentSpec& spec() const { return spec_; }

  // Exclusive use of the dispatcher for logic composed over several of its calls (ask/tell: an
  // ask is a lease and a store write in one step), for the Held's lifetime. Call nothing else on
  // the core while holding it.
  class Held {
   public:
    Dispatcher& dispatcher() { return *core_.dispatcher_; }

   private:
    friend class RunCore;
    explicit Held(RunCore& core) : core_(core), lock_(&core.mu_) {}
    RunCore& core_;
    absl::MutexLock lock_;
  };
  Held Hold() { return Held(*this); }

 private:
  absl::StatusOr<PoolsRound> RoundLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Ending VerdictLocked(const PoolsRound& round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  const std::unique_ptr<Dispatcher> dispatcher_ ABSL_PT_GUARDED_BY(mu_);
  std::unique_ptr<Pools> pools_ ABSL_GUARDED_BY(mu_);
  const v1::ExperimentSpec spec_;
  const Clock* const clock_;
  const absl::Time start_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_RUN_CORE_H_
