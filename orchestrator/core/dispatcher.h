#ifndef SEXTANT_ORCHESTRATOR_CORE_DISPATCHER_H_
#define SEXTANT_ORCHESTRATOR_CORE_DISPATCHER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "orchestrator/core/objectives.h"
#include "orchestrator/core/store.h"
#include "sextant/v1/experiment.pb.h"
#include "sextant/v1/worker_service.pb.h"
#include "strategies/sampler.h"
#include "strategies/scheduler.h"
#include "strategies/search_space.h"

namespace sextant {

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

// Counts and the best value so far, for progress lines and `status`.
struct DispatchStats {
  int max_trials = 0;
  int created = 0;
  std::map<std::string, int> by_state;  // state name -> count
  int finished = 0;                     // COMPLETED + PRUNED + FAILED
  std::optional<double> best_value;
  int64_t best_trial = 0;
  int preemptions = 0;           // attempts ended by a preemption notice, all trials
  std::optional<double> spend;   // committed spend, when instances are billed
  std::optional<double> budget;  // budget.max_cost, when set
  // Several objectives: no best_value; the size of the front of feasible completed trials.
  int front_size = 0;
  std::optional<double> hypervolume;  // several objectives: of that front (see results.h)
  int failed = 0;                     // trials that ended FAILED
  // The latest trials to fail (at most 8), in the order they failed: id and error.
  std::vector<std::pair<int64_t, std::string>> recent_failures;
};

// The longest hostname a worker may register with.
inline constexpr size_t kMaxHostnameBytes = 512;

// search.max_failed_trials as it holds: the value set, else max(5, ceil(max_trials / 5)).
int MaxFailedTrials(const v1::Search& search);
// search.max_failed_in_a_row as it holds: the value set, else 5.
int MaxFailedInARow(const v1::Search& search);

// The queue of trials and the leases on them: the orchestrator's core, with no gRPC in it.
// Every state change is committed to the Store before the method returns, so whatever a
// caller acknowledges is durable. A message from an attempt that no longer holds the lease is
// rejected with Aborted. Not thread-safe: the service calls it under one lock.
class Dispatcher;

// What the run around a dispatcher decides for it: the study's privacy and cost budgets, the
// fleet's placement and bills (FleetDriver::Connect). Each one unset changes nothing.
struct DispatchRules {
  // No trial is created beyond create_limit(d) trials in all (the study's privacy budget,
  // budget.max_epsilon, allows no more); trials already created run on. Asked whenever a trial
  // might be created, so it sees every trial that has just ended. Unset: no limit.
  std::function<int64_t(const Dispatcher&)> create_limit;
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

class Dispatcher {
 public:
  // Builds the dispatcher over a store, loading any earlier state (a resume): trials that were
  // RUNNING, PENDING, CANCELLED or PREEMPTED go back to the queue and will get a new attempt.
  // scheduler may be null (every trial runs to its end); with one, trials report the fidelity
  // key and the scheduler decides how far each goes. A resumed run with a scheduler continues
  // the requeued trials but starts the scheduler's bookkeeping afresh.
  static absl::StatusOr<std::unique_ptr<Dispatcher>> Create(
      v1::ExperimentSpec spec, Store* store, std::unique_ptr<Sampler> sampler, Clock* clock,
      DispatcherOptions options, std::unique_ptr<Scheduler> scheduler = nullptr);

  // Registers a worker. FailedPrecondition when its protocol version differs from ours;
  // InvalidArgument for a region, pool or launch token that is not a valid id or a hostname
  // over kMaxHostnameBytes; PermissionDenied for a pool of the run in another region.
  absl::StatusOr<v1::RegisterResponse> Register(const v1::RegisterRequest& request);

  // Gives the worker a trial (creating one from the sampler when the queue is empty), or
  // retry when none can start now, or done when the experiment has ended.
  absl::StatusOr<v1::LeaseResponse> Lease(int64_t worker_id);

  // Renews the lease. Returns what the trial should do (stop when the run is ending, or what
  // the scheduler decided). Aborted for a stale attempt.
  absl::StatusOr<v1::TrialAction> Heartbeat(const v1::HeartbeatRequest& request);

  // Stores measurements exactly once each, keyed by (trial, attempt, sequence), passes those
  // that carry the fidelity key to the scheduler, and renews the lease. Returns the action for
  // the trial (continue, stop, pause). Aborted for a stale attempt (nothing stored).
  absl::StatusOr<v1::TrialAction> Report(const v1::ReportRequest& request);

  // Ends an attempt: COMPLETED (exit 0 and a finite objective), PRUNED when the scheduler asked
  // or the request says so (pruned), paused when the scheduler asked, or FAILED with the reason
  // (requeued while failures <= max_restarts). With lease_next, the next lease is made in the same
  // transaction. Aborted for a stale attempt.
  absl::StatusOr<v1::CompleteResponse> Complete(const v1::CompleteRequest& request);

  // Expires lapsed leases: their trials go back to the queue, to run as a new attempt.
  // Also writes buffered telemetry (at most every 5 s). Returns the number expired.
  absl::StatusOr<int> Tick();

  // The worker's instance is gone (killed, or taken back without notice): it gets no more work,
  // and the trial it ran, if any, goes back to the front of the queue at once as a lost
  // attempt (as when its lease lapses, without waiting for that). Returns the trials requeued.
  absl::StatusOr<int> WorkerLost(int64_t worker_id, const std::string& why);

  // Ends the run early (SIGINT): running trials become CANCELLED, nothing new is leased.
  absl::Status Interrupt();

  // The budget (max_cost or max_wall_time) is spent: nothing new is leased or promoted, and a
  // running trial that hands itself back after its preemption-style notice (it wrote its
  // checkpoint) becomes CANCELLED with `why`, not PREEMPTED: it is not counted as a preemption
  // and `resume` continues it from the checkpoint. Call Interrupt() for those still running
  // when the wind-down ends.
  absl::Status BeginStop(const std::string& why);
  // Trials running now.
  int running() const { return running_; }

  // Records the run's end in the store (Store::EndRun): its final state, with why (default
  // none) in its run_finished event.
  absl::Status MarkRunState(v1::RunState state, const std::string& why = "");

  // True when no trial is pending or running and no further trial will be created.
  bool Finished() const;
  // True while the sampler may still create new trials (room under search.max_trials, the
  // space not exhausted, no target reached, not interrupted).
  bool MayCreate() const { return CanCreate(); }
  // The failure policy of a run that launches its trials (search.mode commands): why the run
  // must end FAILED now, quoting the error, once search.max_failed_trials trials have failed,
  // or the last search.max_failed_in_a_row ended trials all failed with the same error (both
  // counted from this dispatcher's start: a resumed run, its cause fixed, goes on), or the run
  // has Finished() and every trial that ended failed. nullopt while it may go on, and
  // always in ask/tell mode, where the client decides what a failure means.
  std::optional<std::string> FailureStop() const;
  // The stored row of trial id as of now; null when the run has no such trial.
  const TrialRow* trial_row(int64_t id) const {
    return id >= 1 && id <= static_cast<int64_t>(trials_.size()) ? &trials_[id - 1].row : nullptr;
  }
  int64_t trial_count() const { return static_cast<int64_t>(trials_.size()); }
  // The lease length (options.lease_seconds).
  double lease_seconds() const { return options_.lease_seconds; }
  DispatchStats Stats() const;

  // For the instance fleet (orchestrator/fleet/fleet.h):
  // How many more trials would start now if enough workers were free: 0 when the run has
  // ended or is held, else up to max_concurrent - running: every free slot while new trials
  // may be created, otherwise the queued (requeued) trials, plus one for a promotion the
  // scheduler has ready; none more while it waits for rungs to fill.
  int Demand() const;
  // The running trial of each busy worker (worker id -> trial id).
  std::map<int64_t, int64_t> RunningByWorker() const;
  // Where each registered worker says it runs, and the token its provider launched it with.
  struct WorkerInfo {
    std::string region;
    std::string pool;
    std::string launch_token;  // empty for a worker started by hand
  };
  const std::map<int64_t, WorkerInfo>& workers() const { return workers_; }
  // What the run around the dispatcher decides for it (DispatchRules); set them before it
  // serves.
  DispatchRules& rules() { return rules_; }
  // True when rules().create_limit, not search.max_trials, is what stops new trials now.
  bool CreateLimited() const {
    const int64_t limit = CreateLimit();
    return static_cast<int64_t>(trials_.size()) >= limit && limit < spec_.search().max_trials();
  }
  // While held, no trial is leased or promoted (the budget cannot pay for more work);
  // running trials go on.
  void SetHold(bool hold) { hold_ = hold; }
  // Queued jobs that only a worker outside the barred pools may take (part of Demand()).
  int TopRungDemand() const;
  // The worker's instance is going away: its next Lease answers `done`, so it exits.
  void RetireWorker(int64_t worker_id) { retired_.insert(worker_id); }
  const v1::ExperimentSpec& spec() const { return spec_; }

 private:
  struct Entry {
    TrialRow row;
    Params params;
    int64_t worker_id = 0;
    absl::Time lease_deadline;
    std::optional<double> objective;       // last reported value of the (first) objective metric
    std::map<std::string, double> latest;  // last value of each objective or constraint metric
    double seconds = 0;                    // wall time of the trial's finished attempts
    double attempt_started = 0;            // when the current attempt was leased
    // Multi-fidelity bookkeeping for the current attempt.
    Decision::Kind action = Decision::Kind::kContinue;  // what the scheduler last asked
    std::string action_reason;
    double attempt_fidelity = -1;    // last fidelity reported in this attempt (-1: none yet)
    std::string fidelity_error;      // set when the fidelity went backwards
    std::set<std::string> reported;  // every metric name the trial has reported
  };

  Dispatcher(v1::ExperimentSpec spec, Store* store, std::unique_ptr<Sampler> sampler, Clock* clock,
             DispatcherOptions options, std::unique_ptr<Scheduler> scheduler);
  absl::Status Load();
  double Now() const;
  bool CanCreate() const;
  bool Better(double a, double b) const;
  absl::StatusOr<Entry*> Current(int64_t trial_id, int attempt, int64_t worker_id);
  // The *Locked methods run inside an open store transaction.
  absl::StatusOr<v1::LeaseResponse> LeaseInTx(int64_t worker_id);
  absl::StatusOr<Entry*> CreateTrialInTx();
  absl::Status StoreMeasurementsInTx(Entry& e,
                                     const google::protobuf::RepeatedPtrField<v1::Measurement>& ms);
  absl::Status FinishInTx(Entry& e, const v1::CompleteRequest& request);
  // A preemption notice ended the attempt: PREEMPTED, requeued first, to resume from its
  // checkpoint; it does not count against max_restarts.
  absl::Status PreemptInTx(Entry& e, const v1::CompleteRequest& request);
  // The trial stops for good: PRUNED at the fidelity it reached, with its last value.
  absl::Status PruneInTx(Entry& e, const std::string& why);
  // On load: whether the RUNNING row is held by a lease from options.held_leases that has
  // not lapsed; if so e keeps it. *lapsed: it was held, but the lease ran out.
  bool KeepHeldOnLoad(Entry& e, const TrialRow& row, bool* lapsed);
  absl::Status FlushTelemetry();
  // Register's checks of what the worker says about itself (see Register).
  absl::Status CheckRegistration(const v1::RegisterRequest& request) const;
  // Re-reads the failure policy (FailureStop) after a trial ended.
  void UpdateFailureStop();
  // The attempt is lost (its lease lapsed, its worker is gone): recorded with an event of
  // `kind`, and the trial goes back to the front of the queue.
  absl::Status LoseInTx(Entry& e, const std::string& kind, const std::string& why);
  // e runs on worker_id now / no longer runs (returns the worker it ran on).
  void SetRunning(Entry& e, int64_t worker_id);
  int64_t ClearRunning(Entry& e);
  // Applies the outcome of an attempt that the scheduler paused or pruned, or that ran to its
  // target. Returns false when the attempt is not the scheduler's business (an ordinary end).
  absl::StatusOr<bool> FinishScheduledInTx(Entry& e, const v1::CompleteRequest& request);
  absl::Status ObserveFidelityInTx(Entry& e, double fidelity);
  absl::StatusOr<Entry*> NextScheduledInTx(double* target, bool* resume, bool* wait);
  bool TopRung(double target) const;
  // True when the worker's pool must not take top-rung jobs.
  bool LowRungsOnly(int64_t worker_id) const;
  // Takes the first queued trial the worker may run off the queue, or returns null.
  Entry* TakeQueued(bool low_rungs_only);
  absl::Status FinalizePausedInTx();
  void AddRung(Entry& e, const std::string& decision);
  double Minimised(double v) const;
  // The trial's objectives and constraints from its latest metrics and built-ins, now.
  TrialEvaluation EvaluateNow(const Entry& e) const;
  double TrialCost(int64_t trial) const {
    return rules_.trial_cost ? rules_.trial_cost(trial) : 0.0;
  }
  // The sampler's observation of e as its row records it (RecordOutcome), with that outcome.
  Observation ObservedAs(const Entry& e, Observation::Outcome outcome) const;
  // Copies the evaluation's values and feasibility into e.row.
  void RecordOutcome(Entry& e) const;
  // The current attempt ended: its wall time joins e.row.seconds.
  void EndAttemptClock(Entry& e);
  std::vector<Observation> ModelHistory() const;
  v1::TrialAction ActionFor(const Entry& e) const;
  absl::Status Event(const std::string& kind, int64_t trial_id, const std::string& message);
  template <typename F>
  auto InTransaction(F&& f) -> decltype(f());

  v1::ExperimentSpec spec_;
  ObjectiveSet objectives_;
  DispatchRules rules_;
  int64_t CreateLimit() const {
    return rules_.create_limit ? rules_.create_limit(*this) : std::numeric_limits<int64_t>::max();
  }
  SearchSpace space_;
  Store* store_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Scheduler> scheduler_;  // may be null
  bool bohb_ = false;                     // fit the sampler on the best fidelity's values
  bool scheduler_done_ = false;
  std::set<int64_t> scheduler_known_;  // trials the scheduler has seen start
  Clock* clock_;
  DispatcherOptions options_;
  std::vector<Entry> trials_;  // trials_[id - 1]
  std::deque<int64_t> queue_;  // PENDING trial ids, oldest first
  std::vector<Observation> history_;
  int running_ = 0;                // running_ids_.size()
  std::set<int64_t> running_ids_;  // RUNNING trials, so that no tick walks every trial
  int64_t next_worker_id_ = 1;
  bool sampler_exhausted_ = false;
  bool interrupted_ = false;
  bool target_reached_ = false;
  bool hold_ = false;
  // The failure policy's bounds are passed: why (FailureStop).
  std::optional<std::string> failure_stop_;
  double session_started_ = 0;  // Now() when this dispatcher was made: its bounds count from it
  bool stopping_ = false;       // BeginStop: winding down for the budget
  std::string stop_reason_;
  std::set<int64_t> retired_;
  std::map<int64_t, WorkerInfo> workers_;
  // Heartbeat samples not yet written: monitoring data, batched so heartbeats stay cheap.
  std::vector<TelemetryRow> telemetry_;
  absl::Time telemetry_flushed_ = absl::InfinitePast();
};

// The JSON text of a measurement's metrics; NaN and infinities are written as strings
// ("nan", "inf", "-inf") so that nothing reported is lost.
std::string MetricsToJson(const google::protobuf::Map<std::string, double>& metrics);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_DISPATCHER_H_
