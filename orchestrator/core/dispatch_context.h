#ifndef SEXTANT_ORCHESTRATOR_CORE_DISPATCH_CONTEXT_H_
#define SEXTANT_ORCHESTRATOR_CORE_DISPATCH_CONTEXT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/clock.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/trial_book.h"
#include "orchestrator/core/trial_judge.h"
#include "orchestrator/core/worker_roster.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/sampler.h"
#include "strategies/scheduler.h"
#include "strategies/search_space.h"

namespace sextant {

class Dispatcher;

// An asked trial's lease as recorded with the run (ask/tell across processes).
struct HeldLease {
  int attempt = 0;
  int64_t worker_id = 0;
  absl::Time deadline;  // it lapses then
  double started = 0;   // unix seconds when the attempt was leased
};

struct DispatcherOptions {
  double lease_seconds = 15;     // a lease lapses this long after the last sign of life; default 15
  double heartbeat_seconds = 2;  // how often workers heartbeat; default 2
  std::string logs_dir;          // sent to workers; default empty (workers keep logs locally)
  std::string checkpoints_dir;   // per-trial folders go below it; default empty
  std::string working_dir;       // where trial commands run; default empty (worker's cwd)
  // Federated tuning: flags of each trial's inner federated run (AssignmentContext), from the
  // run's own: its --tls-dir (absolute), which the inner run serves and dials with too, and its
  // Slurm partitions, where the inner run places its participants. Default none.
  std::vector<std::string> federated_trial_flags;
  // Ask/tell across processes: a trial RUNNING in the store whose attempt is held here with a
  // deadline still ahead stays RUNNING on load, with that lease, instead of being requeued.
  // Default: none (every RUNNING trial is requeued, as after a crash).
  std::map<int64_t, HeldLease> held_leases;
  // Load without the run_resumed event when nothing was requeued (an offline `sextant ask` or
  // `sextant tell` opens the run for one call). Default false.
  bool quiet_load = false;
};

// What the run around a dispatcher decides for it: the study's privacy and cost budgets, the
// fleet's placement and bills (FleetDriver::Connect). Each one unset changes nothing.
struct DispatchRules {
  // No trial is created beyond create_limit(trials) trials in all (the study's privacy budget,
  // budget.max_epsilon, allows no more); trials already created run on. Asked whenever a trial
  // might be created, so it sees every trial that has just ended. Unset: no limit.
  std::function<int64_t(const TrialBook&)> create_limit;
  // Asked before each lease (a new attempt, a resume or a promotion): false holds it back, as
  // SetHold does, until a later lease finds it true. Unset: every lease may go.
  std::function<bool(const Dispatcher&)> lease_gate;
  // Placement keeps the top rung (a job whose fidelity target is the maximum) off these pools:
  // their workers never lease such a job, which waits in the queue for a worker of another
  // pool. top_rung_why goes into the "placement" event of each top-rung lease. Unset: none.
  std::set<std::string> top_rung_barred;
  std::string top_rung_why;
  // Where the built-in metric `cost` comes from: the trial's share of the ledger so far, every
  // attempt counted. Unset: 0 (nothing is billed).
  std::function<double(int64_t trial)> trial_cost;
  // The run's committed spend, for cost_aware sampling's budget share. Unset: 0.
  std::function<double()> spend;
  // Told at once whenever a worker starts an attempt (worker, trial) or ends one (worker, 0),
  // so that its instance's time is charged to the trial exactly while it runs. Unset: none.
  std::function<void(int64_t worker, int64_t trial)> worker_trial;
};

// How far the run has come, as the dispatcher's parts decide it.
struct RunFlags {
  bool interrupted = false;        // Interrupt: nothing new is leased, running trials cancelled
  bool stopping = false;           // BeginStop: winding down for the budget
  std::string stop_reason;         // BeginStop's why
  bool sampler_exhausted = false;  // the sampler made its last trial
  bool target_reached = false;     // objective.target was reached
  bool schedule_done = false;      // the scheduler has no more jobs
  // The failure policy's bounds are passed: why (FailureBoundsPassed).
  std::optional<std::string> failure_stop;
  double session_started = 0;  // unix seconds when the dispatcher was made: bounds count from it
};

// What the Dispatcher and its trials' state machine (TrialStates) share; the Dispatcher owns it.
struct DispatchContext {
  DispatchContext(v1::ExperimentSpec spec_in, Store* store_in, std::unique_ptr<Sampler> sampler_in,
                  Clock* clock_in, DispatcherOptions options_in,
                  std::unique_ptr<Scheduler> scheduler_in)
      : spec(std::move(spec_in)),
        space(ToSearchSpace(spec)),
        options(std::move(options_in)),
        store(store_in),
        clock(clock_in),
        judge(spec, clock_in, &rules.trial_cost),
        book([this](int64_t worker, int64_t trial) {
          if (rules.worker_trial) rules.worker_trial(worker, trial);
        }),
        sampler(std::move(sampler_in)),
        scheduler(std::move(scheduler_in)) {}
  DispatchContext(const DispatchContext&) = delete;
  DispatchContext& operator=(const DispatchContext&) = delete;

  v1::ExperimentSpec spec;
  SearchSpace space;
  DispatcherOptions options;
  Store* store;
  Clock* clock;
  DispatchRules rules;
  TrialJudge judge;
  TrialBook book;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<Scheduler> scheduler;  // may be null: every trial runs to its end
  RunFlags flags;
  WorkerRoster roster;
  TelemetryBuffer telemetry;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_DISPATCH_CONTEXT_H_
