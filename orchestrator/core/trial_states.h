#ifndef SEXTANT_ORCHESTRATOR_CORE_TRIAL_STATES_H_
#define SEXTANT_ORCHESTRATOR_CORE_TRIAL_STATES_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "orchestrator/core/dispatch_context.h"
#include "sextant/v1/worker_service.pb.h"

namespace sextant {

// The JSON text of a measurement's metrics; NaN and infinities are written as strings
// ("nan", "inf", "-inf") so that nothing reported is lost.
std::string MetricsToJson(const google::protobuf::Map<std::string, double>& metrics);

// The trials' state machine: how a trial is made, restored, started, told its measurements,
// and how each attempt ends, every change written to the store (inside the caller's open
// transaction) as it is made in the book. What runs next on which worker is the Dispatcher's.
// Not thread-safe.
class TrialStates {
 public:
  explicit TrialStates(DispatchContext* c) : c_(*c) {}

  // Rebuilds the book from the store, in its own transaction, repairing what a crash left:
  // attempts that were running are closed as lost and their trials requeued (unless held by
  // a lease in options.held_leases that has not lapsed). Marks the run RUNNING.
  absl::Status Restore();

  // An event of the run (trial 0: the run's own).
  absl::Status Event(const std::string& kind, int64_t trial_id, const std::string& message);
  // True while the sampler may still create new trials (room under search.max_trials and the
  // rules' create_limit, the space not exhausted, no target reached, not interrupted).
  bool CanCreate() const;
  // True when no trial is pending or running and no further trial will be created.
  bool Finished() const;

  // A new PENDING trial from the sampler; null when the sampler ran dry (the run records why).
  absl::StatusOr<TrialEntry*> Create();
  // Asks the scheduler what a free worker should do. Sets *wait when nothing can start now;
  // returns null (without *wait) when the caller should look again (e.g. the schedule ended).
  absl::StatusOr<TrialEntry*> NextScheduled(double* target, bool* resume, bool* wait);
  // A queued trial restarts: a scheduler made since (a resume) learns of it as it starts.
  void Rescheduled(const TrialEntry& e, double target);
  // The target is the top rung (the fidelity's maximum) of a scheduled run.
  bool TopRung(double target) const;
  // The scheduled job at target may not run on this worker: it waits in the queue.
  absl::Status Park(TrialEntry& e, double target, const std::string& why);
  // The new attempt of e (its attempts counted, its bookkeeping reset) runs on worker now.
  absl::Status Start(TrialEntry& e, int64_t worker);
  // The new attempt could not be made into an assignment: the trial FAILED with error.
  absl::Status FailToStart(TrialEntry& e, const std::string& error);

  // Stores measurements exactly once each, keyed by (trial, attempt, sequence), and passes
  // those that carry the fidelity key to the scheduler.
  absl::Status StoreMeasurements(TrialEntry& e,
                                 const google::protobuf::RepeatedPtrField<v1::Measurement>& ms);
  // Ends the attempt as Dispatcher::Complete describes.
  absl::Status Finish(TrialEntry& e, const v1::CompleteRequest& request);
  // The attempt is lost (its lease lapsed, its worker is gone): recorded with an event of
  // `kind`, and the trial goes back to the front of the queue.
  absl::Status Lose(TrialEntry& e, const std::string& kind, const std::string& why);
  // Every running attempt is CANCELLED (the run is interrupted).
  absl::Status CancelRunning();

 private:
  bool KeepHeldOnLoad(TrialEntry& e, const TrialRow& row, bool* lapsed);
  void RestoreMetrics(const std::vector<MeasurementRow>& ms);
  absl::Status FinalizePaused();
  absl::Status ObserveFidelity(TrialEntry& e, double fidelity);
  // The attempt ended without error: COMPLETED, its value recorded.
  absl::Status Complete(TrialEntry& e, const TrialEvaluation& evaluation, int exit_code);
  // The attempt failed: requeued while failures <= max_restarts, else FAILED.
  absl::Status Fail(TrialEntry& e, const std::string& error, int exit_code);
  // A preemption notice ended the attempt: PREEMPTED, requeued first, to resume from its
  // checkpoint; it does not count against max_restarts.
  absl::Status Preempt(TrialEntry& e, const v1::CompleteRequest& request);
  // The trial stops for good: PRUNED at the fidelity it reached, with its last value.
  absl::Status Prune(TrialEntry& e, const std::string& why);
  // Applies the outcome of an attempt that the scheduler paused or pruned, or that ran to its
  // target. Returns false when the attempt is not the scheduler's business (an ordinary end).
  absl::StatusOr<bool> FinishScheduled(TrialEntry& e, const v1::CompleteRequest& request);
  // BOHB fits its model on the highest fidelity that has enough observations.
  std::vector<Observation> ModelHistory() const;

  DispatchContext& c_;
  std::set<int64_t> scheduler_known_;  // trials the scheduler has seen start
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_TRIAL_STATES_H_
