#include "orchestrator/core/dispatcher.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "orchestrator/core/trial_command.h"

namespace sextant {
namespace {

// What a running trial is told to do next.
v1::TrialAction ActionFor(const TrialEntry& e, const RunFlags& flags) {
  if (flags.interrupted || e.action == Decision::Kind::kStop || !e.fidelity_error.empty()) {
    return v1::ACTION_STOP;
  }
  if (flags.stopping) return v1::ACTION_NOTICE;  // the budget wind-down: checkpoint, hand back
  return e.action == Decision::Kind::kPause ? v1::ACTION_PAUSE : v1::ACTION_CONTINUE;
}

// A new attempt of e at target: counted, and its bookkeeping reset.
void NewAttempt(TrialEntry& e, double target) {
  e.row.attempts += 1;
  e.row.target = target;
  e.action = Decision::Kind::kContinue;
  e.action_reason.clear();
  e.attempt_fidelity = -1;
  e.fidelity_error.clear();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Dispatcher>> Dispatcher::Create(
    v1::ExperimentSpec spec, Store* store, std::unique_ptr<Sampler> sampler, Clock* clock,
    DispatcherOptions options, std::unique_ptr<Scheduler> scheduler) {
  std::unique_ptr<Dispatcher> d(new Dispatcher(std::move(spec), store, std::move(sampler), clock,
                                               std::move(options), std::move(scheduler)));
  SEXTANT_RETURN_IF_ERROR(d->states_.Restore());
  return d;
}

std::optional<std::string> Dispatcher::FailureStop() const {
  if (c_.flags.failure_stop || c_.spec.search().mode() == v1::Search::ASK_TELL || !Finished()) {
    return c_.flags.failure_stop;
  }
  return EveryTrialFailed(c_.book);
}

bool Dispatcher::CreateLimited() const {
  if (!c_.rules.create_limit) return false;
  const int64_t limit = c_.rules.create_limit(c_.book);
  return c_.book.size() >= limit && limit < c_.spec.search().max_trials();
}

absl::StatusOr<v1::RegisterResponse> Dispatcher::Register(const v1::RegisterRequest& request) {
  SEXTANT_RETURN_IF_ERROR(CheckRegistration(c_.spec, request));
  const int64_t id = c_.roster.Add(request);
  SEXTANT_RETURN_IF_ERROR(WithinTransaction(c_.store, [&]() -> absl::Status {
    SEXTANT_RETURN_IF_ERROR(c_.store->AddWorker(id, request.region(), request.pool(),
                                                request.hostname(), request.pid(), c_.judge.Now()));
    return states_.Event(
        "worker_registered", 0,
        absl::StrCat("worker ", id, " region=", request.region(), " pool=", request.pool(),
                     " host=", request.hostname(), " pid=", request.pid()));
  }));
  v1::RegisterResponse response;
  response.set_worker_id(id);
  response.set_experiment(c_.spec.name());
  response.set_lease_seconds(c_.options.lease_seconds);
  response.set_heartbeat_seconds(c_.options.heartbeat_seconds);
  response.set_log_dir(c_.options.logs_dir);
  response.set_checkpoint_root(c_.options.checkpoints_dir);
  response.set_working_dir(c_.options.working_dir);
  return response;
}

absl::StatusOr<v1::LeaseResponse> Dispatcher::Lease(int64_t worker_id) {
  return WithinTransaction(c_.store, [&] { return LeaseInTx(worker_id); });
}

// Long because it walks each source of work in turn: the queue, the scheduler's next job, a
// new trial; and each may turn out to have nothing this worker can run.
absl::StatusOr<v1::LeaseResponse> Dispatcher::LeaseInTx(int64_t worker_id) {
  v1::LeaseResponse response;
  const v1::Search& search = c_.spec.search();
  const int slots = std::max(1, search.max_concurrent());
  const bool low_only = !c_.rules.top_rung_barred.empty() &&
                        c_.rules.top_rung_barred.count(c_.roster.pool(worker_id)) > 0;
  auto placement = [&](double target, const std::string& what) {
    return absl::StrCat("top rung (", search.fidelity().name(), "=", FormatParamValue(target), ") ",
                        what, c_.roster.pool(worker_id), ": ", c_.rules.top_rung_why);
  };
  while (true) {
    if (c_.flags.interrupted || c_.flags.stopping || Finished() || c_.roster.retired(worker_id)) {
      response.set_done(true);
      return response;
    }
    // The failure policy has ended the run: the orchestrator's loop winds it down.
    if (c_.flags.failure_stop || hold_ || c_.book.running() >= slots) break;
    if (c_.rules.lease_gate && !c_.rules.lease_gate(*this)) break;
    TrialEntry* e = nullptr;
    double target = 0;
    bool resume = false;
    if (!c_.book.queue().empty() && (e = c_.book.TakeQueued([&](const TrialEntry& q) {
                                      return low_only && states_.TopRung(q.row.target);
                                    })) != nullptr) {
      target = e->row.target;
      resume = e->row.attempts > 0;
      // After a resume the scheduler is new: it learns of requeued trials as they restart.
      states_.Rescheduled(*e, target);
    } else if (c_.scheduler) {
      bool wait = false;
      // Jobs parked for other pools hold their slots.
      if (c_.book.running() + static_cast<int>(c_.book.queue().size()) >= slots) break;
      SEXTANT_ASSIGN_OR_RETURN(e, states_.NextScheduled(&target, &resume, &wait));
      if (wait) break;
      if (e == nullptr) continue;  // a new trial could not be made, or the schedule ended
      if (low_only && states_.TopRung(target)) {
        // Not on this worker's pool: the job waits for a worker of a pool placement allows.
        SEXTANT_RETURN_IF_ERROR(
            states_.Park(*e, target, placement(target, "waits for a worker off pool ")));
        break;
      }
    } else if (states_.CanCreate()) {
      SEXTANT_ASSIGN_OR_RETURN(e, states_.Create());
      if (e == nullptr) continue;  // the sampler ran dry; maybe we are done now
    } else {
      break;
    }
    NewAttempt(*e, target);
    AssignmentContext context{e->row.id, e->row.attempts,
                              c_.options.checkpoints_dir.empty()
                                  ? ""
                                  : absl::StrCat(c_.options.checkpoints_dir, "/trial-", e->row.id),
                              c_.options.federated_trial_flags};
    absl::StatusOr<v1::Assignment> a = BuildAssignment(c_.spec, c_.space, e->params, context);
    if (!a.ok()) {
      SEXTANT_RETURN_IF_ERROR(states_.FailToStart(*e, std::string(a.status().message())));
      continue;
    }
    if (states_.TopRung(target) && !c_.rules.top_rung_barred.empty()) {
      SEXTANT_RETURN_IF_ERROR(states_.Event(
          "placement", e->row.id,
          placement(target, absl::StrCat("runs on worker ", worker_id, " of pool "))));
    }
    SEXTANT_RETURN_IF_ERROR(states_.Start(*e, worker_id));
    if (target > 0) {
      a->set_fidelity_target(target);
      (*a->mutable_env())["SEXTANT_FIDELITY"] = FormatParamValue(target);
    }
    a->set_resume(resume);
    *response.mutable_assignment() = *std::move(a);
    return response;
  }
  response.set_retry(true);
  return response;
}

absl::StatusOr<TrialEntry*> Dispatcher::Current(int64_t trial_id, int attempt, int64_t worker_id) {
  if (trial_id < 1 || trial_id > c_.book.size()) {
    return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  }
  TrialEntry& e = c_.book.at(trial_id);
  if (e.row.state != v1::RUNNING || e.row.attempts != attempt || e.worker_id != worker_id) {
    return absl::AbortedError(absl::StrCat("trial ", trial_id, " attempt ", attempt,
                                           " no longer holds the lease (stale)"));
  }
  return &e;
}

absl::StatusOr<v1::TrialAction> Dispatcher::Heartbeat(const v1::HeartbeatRequest& request) {
  c_.telemetry.Add(TelemetryRow{c_.judge.Now(), request.worker_id(), request.trial_id(),
                                request.cpu_percent(), request.rss_bytes(), request.gpu_count(),
                                request.gpu_utilization(), request.gpu_memory_bytes(),
                                request.gpu_memory_total_bytes()});
  if (request.trial_id() == 0) return v1::ACTION_CONTINUE;
  SEXTANT_ASSIGN_OR_RETURN(TrialEntry * e,
                           Current(request.trial_id(), request.attempt(), request.worker_id()));
  e->lease_deadline = c_.clock->Now() + absl::Seconds(c_.options.lease_seconds);
  return ActionFor(*e, c_.flags);
}

absl::StatusOr<v1::TrialAction> Dispatcher::Report(const v1::ReportRequest& request) {
  return WithinTransaction(c_.store, [&]() -> absl::StatusOr<v1::TrialAction> {
    v1::TrialAction action = c_.flags.interrupted ? v1::ACTION_STOP : v1::ACTION_CONTINUE;
    for (const v1::Measurement& m : request.measurements()) {
      SEXTANT_ASSIGN_OR_RETURN(TrialEntry * e,
                               Current(m.trial_id(), m.attempt(), request.worker_id()));
      google::protobuf::RepeatedPtrField<v1::Measurement> one;
      *one.Add() = m;
      SEXTANT_RETURN_IF_ERROR(states_.StoreMeasurements(*e, one));
      e->lease_deadline = c_.clock->Now() + absl::Seconds(c_.options.lease_seconds);
      action = ActionFor(*e, c_.flags);
    }
    return action;
  });
}

absl::StatusOr<v1::CompleteResponse> Dispatcher::Complete(const v1::CompleteRequest& request) {
  return WithinTransaction(c_.store, [&]() -> absl::StatusOr<v1::CompleteResponse> {
    SEXTANT_ASSIGN_OR_RETURN(TrialEntry * e,
                             Current(request.trial_id(), request.attempt(), request.worker_id()));
    SEXTANT_RETURN_IF_ERROR(states_.Finish(*e, request));
    v1::CompleteResponse response;
    if (request.lease_next()) {
      SEXTANT_ASSIGN_OR_RETURN(*response.mutable_next(), LeaseInTx(request.worker_id()));
    }
    return response;
  });
}

absl::StatusOr<int> Dispatcher::Tick() {
  const absl::Time now = c_.clock->Now();
  SEXTANT_RETURN_IF_ERROR(c_.telemetry.Flush(c_.store, now, absl::Seconds(5)));
  std::vector<TrialEntry*> lapsed;
  for (TrialEntry* e : c_.book.Running()) {
    if (e->lease_deadline < now) lapsed.push_back(e);
  }
  if (lapsed.empty()) return 0;
  SEXTANT_RETURN_IF_ERROR(WithinTransaction(c_.store, [&]() -> absl::Status {
    // Oldest first at the front of the queue: requeued work runs before new trials.
    for (auto it = lapsed.rbegin(); it != lapsed.rend(); ++it) {
      TrialEntry& e = **it;
      SEXTANT_RETURN_IF_ERROR(
          states_.Lose(e, "lease_expired",
                       absl::StrCat("lease of worker ", e.worker_id, " lapsed (no heartbeat for ",
                                    c_.options.lease_seconds, "s)")));
    }
    return absl::OkStatus();
  }));
  return static_cast<int>(lapsed.size());
}

absl::StatusOr<int> Dispatcher::WorkerLost(int64_t worker_id, const std::string& why) {
  c_.roster.Retire(worker_id);
  std::vector<TrialEntry*> lost;
  for (TrialEntry* e : c_.book.Running()) {
    if (e->worker_id == worker_id) lost.push_back(e);
  }
  if (lost.empty()) return 0;
  SEXTANT_RETURN_IF_ERROR(WithinTransaction(c_.store, [&]() -> absl::Status {
    for (TrialEntry* e : lost) {
      SEXTANT_RETURN_IF_ERROR(states_.Lose(*e, "worker_lost",
                                           absl::StrCat("worker ", worker_id, " is gone (", why,
                                                        "); requeued to resume from its "
                                                        "checkpoint")));
    }
    return absl::OkStatus();
  }));
  return static_cast<int>(lost.size());
}

absl::Status Dispatcher::Interrupt() {
  if (c_.flags.interrupted) return absl::OkStatus();
  return WithinTransaction(c_.store, [&]() -> absl::Status {
    c_.flags.interrupted = true;
    return states_.CancelRunning();
  });
}

absl::Status Dispatcher::BeginStop(const std::string& why) {
  if (c_.flags.stopping || c_.flags.interrupted) return absl::OkStatus();
  c_.flags.stopping = true;
  c_.flags.stop_reason = why;
  return WithinTransaction(c_.store, [&]() -> absl::Status {
    return states_.Event("run_stopping", 0,
                         absl::StrCat(why, "; ", c_.book.running(),
                                      " running trials get the notice to checkpoint and stop"));
  });
}

absl::Status Dispatcher::MarkRunState(v1::RunState state, const std::string& why) {
  SEXTANT_RETURN_IF_ERROR(c_.telemetry.Flush(c_.store, c_.clock->Now()));
  return WithinTransaction(
      c_.store, [&]() -> absl::Status { return c_.store->EndRun(state, c_.judge.Now(), why); });
}

int Dispatcher::Demand() const {
  if (c_.flags.interrupted || c_.flags.stopping || hold_ || c_.flags.failure_stop || Finished()) {
    return 0;
  }
  const int slots = std::max(1, c_.spec.search().max_concurrent()) - c_.book.running();
  if (slots <= 0) return 0;
  const int queued = static_cast<int>(c_.book.queue().size());
  if (!c_.scheduler) return MayCreate() ? slots : std::min(slots, queued);
  if (c_.flags.schedule_done) return std::min(slots, queued);
  // What the scheduler would hand a free worker now (asking changes nothing): new trials fill
  // every slot; a promotion is one job more than the queue; while it waits for rungs to fill,
  // only the queue can start, and a worker launched for more would sit idle.
  switch (c_.scheduler->NextJob(MayCreate()).kind) {
    case Job::Kind::kNew:
      return slots;
    case Job::Kind::kPromote:
      return std::min(slots, queued + 1);
    case Job::Kind::kDone:  // the next lease ends the schedule (pruning the paused trials)
      return std::min(slots, std::max(queued, 1));
    default:
      return std::min(slots, queued);
  }
}

int Dispatcher::TopRungDemand() const {
  if (c_.rules.top_rung_barred.empty() || c_.flags.interrupted || c_.flags.stopping || hold_) {
    return 0;
  }
  int n = 0;
  for (int64_t id : c_.book.queue()) n += states_.TopRung(c_.book.at(id).row.target) ? 1 : 0;
  return n;
}

}  // namespace sextant
