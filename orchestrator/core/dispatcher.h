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
#include "common/clock.h"
#include "orchestrator/core/dispatch_context.h"
#include "orchestrator/core/dispatch_stats.h"
#include "orchestrator/core/failure_policy.h"
#include "orchestrator/core/trial_states.h"
#include "sextant/v1/experiment.pb.h"
#include "sextant/v1/worker_service.pb.h"

namespace sextant {

// The queue of trials and the leases on them: the orchestrator's core, with no gRPC in it.
// Every state change is committed to the Store before the method returns, so whatever a
// caller acknowledges is durable. A message from an attempt that no longer holds the lease is
// rejected with Aborted. Not thread-safe: the run core calls it under one lock.
// The trials' states are TrialStates'; the Dispatcher decides what runs on which worker.
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
  int running() const { return c_.book.running(); }

  // Records the run's end in the store (Store::EndRun): its final state, with why (default
  // none) in its run_finished event.
  absl::Status MarkRunState(v1::RunState state, const std::string& why = "");

  // True when no trial is pending or running and no further trial will be created.
  bool Finished() const { return states_.Finished(); }
  // True while the sampler may still create new trials (room under search.max_trials, the
  // space not exhausted, no target reached, not interrupted).
  bool MayCreate() const { return states_.CanCreate(); }
  // The failure policy of a run that launches its trials (search.mode commands): why the run
  // must end FAILED now, quoting the error, once search.max_failed_trials trials have failed,
  // or the last search.max_failed_in_a_row ended trials all failed with the same error (both
  // counted from this dispatcher's start: a resumed run, its cause fixed, goes on), or the run
  // has Finished() and every trial that ended failed. nullopt while it may go on, and
  // always in ask/tell mode, where the client decides what a failure means.
  std::optional<std::string> FailureStop() const;
  // The run's trials as of now: rows by id, the running ones (TrialBook).
  const TrialBook& trials() const { return c_.book; }
  // The lease length (options.lease_seconds).
  double lease_seconds() const { return c_.options.lease_seconds; }
  DispatchStats Stats() const { return CountTrials(c_.book, c_.judge, c_.spec, MayCreate()); }

  // For the instance fleet (orchestrator/fleet/fleet.h):
  // How many more trials would start now if enough workers were free: 0 when the run has
  // ended or is held, else up to max_concurrent - running: every free slot while new trials
  // may be created, otherwise the queued (requeued) trials, plus one for a promotion the
  // scheduler has ready; none more while it waits for rungs to fill.
  int Demand() const;
  // The registered workers and where each runs; Retire(worker) when its instance is going
  // away: its next Lease answers `done`, so it exits.
  WorkerRoster& roster() { return c_.roster; }
  // What the run around the dispatcher decides for it (DispatchRules); set them before it
  // serves.
  DispatchRules& rules() { return c_.rules; }
  // True when rules().create_limit, not search.max_trials, is what stops new trials now.
  bool CreateLimited() const;
  // While held, no trial is leased or promoted (the budget cannot pay for more work);
  // running trials go on.
  void SetHold(bool hold) { hold_ = hold; }
  // Queued jobs that only a worker outside the barred pools may take (part of Demand()).
  int TopRungDemand() const;
  const v1::ExperimentSpec& spec() const { return c_.spec; }

 private:
  Dispatcher(v1::ExperimentSpec spec, Store* store, std::unique_ptr<Sampler> sampler, Clock* clock,
             DispatcherOptions options, std::unique_ptr<Scheduler> scheduler)
      : c_(std::move(spec), store, std::move(sampler), clock, std::move(options),
           std::move(scheduler)),
        states_(&c_) {}
  // The entry of the attempt that holds the lease: NotFound for no such trial, Aborted for a
  // stale attempt.
  absl::StatusOr<TrialEntry*> Current(int64_t trial_id, int attempt, int64_t worker_id);
  // Lease inside an open store transaction.
  absl::StatusOr<v1::LeaseResponse> LeaseInTx(int64_t worker_id);

  DispatchContext c_;
  TrialStates states_;
  bool hold_ = false;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_DISPATCHER_H_
