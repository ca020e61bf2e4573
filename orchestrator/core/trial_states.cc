#include "orchestrator/core/trial_states.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/failure_policy.h"
#include "orchestrator/core/rung_record.h"
#include "orchestrator/core/trial_command.h"

namespace sextant {

std::string MetricsToJson(const google::protobuf::Map<std::string, double>& metrics) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, value] : metrics) {
    if (std::isfinite(value)) {
      j[name] = value;
    } else {
      j[name] = std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
    }
  }
  return j.dump();
}

absl::Status TrialStates::Event(const std::string& kind, int64_t trial_id,
                                const std::string& message) {
  return c_.store->AddEvent(c_.judge.Now(), kind, trial_id, message);
}

absl::Status TrialStates::Restore() {
  c_.flags.session_started = c_.judge.Now();
  SEXTANT_ASSIGN_OR_RETURN(std::vector<TrialRow> rows, c_.store->LoadTrials());
  SEXTANT_ASSIGN_OR_RETURN(std::vector<MeasurementRow> ms, c_.store->LoadMeasurements());
  SEXTANT_ASSIGN_OR_RETURN(int64_t max_worker, c_.store->MaxWorkerId());
  c_.roster.ContinueAfter(max_worker);
  SEXTANT_RETURN_IF_ERROR(c_.store->Begin());
  int held = 0;
  for (TrialRow& row : rows) {
    if (row.id != c_.book.size() + 1) {
      c_.store->Rollback();
      return absl::DataLossError(absl::StrCat("store: trial ids are not contiguous at ", row.id));
    }
    TrialEntry e;
    SEXTANT_ASSIGN_OR_RETURN(e.params, ParamsFromJson(row.params_json, c_.space));
    bool lapsed = false;
    if (row.state == v1::RUNNING && KeepHeldOnLoad(e, row, &lapsed)) {
      ++held;
    } else if (!TrialEnded(row.state)) {
      // A fresh scheduler knows nothing of paused trials: they continue to their last target.
      row.paused = false;
      if (row.state == v1::RUNNING) {
        SEXTANT_RETURN_IF_ERROR(c_.store->FinishAttempt(
            row.id, row.attempts, v1::ATTEMPT_LOST, -1,
            lapsed ? absl::StrCat("lease lapsed (not told within ", c_.options.lease_seconds, "s)")
                   : "orchestrator stopped",
            c_.judge.Now()));
      }
      row.state = v1::PENDING;
      SEXTANT_RETURN_IF_ERROR(c_.store->PutTrial(row));
      c_.book.queue().push_back(row.id);
    }
    e.row = std::move(row);
    c_.book.Add(std::move(e));
  }
  RestoreMetrics(ms);
  const size_t queued = c_.book.queue().size();
  if (c_.book.size() > 0 && !(c_.options.quiet_load && queued == 0)) {
    SEXTANT_RETURN_IF_ERROR(Event(
        "run_resumed", 0,
        absl::StrCat(c_.book.size(), " trials stored, ", queued, " requeued",
                     held > 0 ? absl::StrCat(", ", held, " still held by their askers") : "")));
  }
  SEXTANT_RETURN_IF_ERROR(c_.store->SetRunState(v1::RUN_RUNNING));
  return c_.store->Commit();
}

// Each trial's latest metrics from its stored measurements, and the sampler's history.
void TrialStates::RestoreMetrics(const std::vector<MeasurementRow>& ms) {
  const ObjectiveSet& objectives = c_.judge.objectives();
  for (const MeasurementRow& m : ms) {
    if (m.trial_id < 1 || m.trial_id > c_.book.size()) continue;
    nlohmann::json j = nlohmann::json::parse(m.metrics_json, nullptr, false);
    if (!j.is_object()) continue;
    TrialEntry& e = c_.book.at(m.trial_id);
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_number() && objectives.Mentions(it.key())) {
        e.latest[it.key()] = it.value().get<double>();
      }
      if (e.reported.size() < 64) e.reported.insert(it.key());
    }
  }
  for (TrialEntry& e : c_.book.entries()) {
    auto first = e.latest.find(objectives.objectives()[0].metric());
    if (first != e.latest.end()) e.objective = first->second;
    Observation o;
    o.params = e.params;
    if (e.row.state == v1::COMPLETED && e.row.value) {
      o = c_.judge.Observed(e, Observation::Outcome::kCompleted);
    } else if (e.row.state == v1::FAILED) {
      o.outcome = Observation::Outcome::kFailed;
    }
    c_.book.history().push_back(std::move(o));
  }
}

bool TrialStates::KeepHeldOnLoad(TrialEntry& e, const TrialRow& row, bool* lapsed) {
  auto it = c_.options.held_leases.find(row.id);
  if (it == c_.options.held_leases.end() || it->second.attempt != row.attempts) return false;
  const HeldLease& lease = it->second;
  if (lease.deadline <= c_.clock->Now()) {
    *lapsed = true;
    return false;
  }
  e.row.id = row.id;  // SetRunning keys on it; the caller copies the whole row in next
  c_.book.SetRunning(e, lease.worker_id);
  e.lease_deadline = lease.deadline;
  e.attempt_started = lease.started;
  // The fresh scheduler learns of the running attempt as if it had just started.
  Rescheduled(e, row.target);
  return true;
}

bool TrialStates::CanCreate() const {
  const int64_t limit =
      c_.rules.create_limit ? c_.rules.create_limit(c_.book) : std::numeric_limits<int64_t>::max();
  return !c_.flags.interrupted && !c_.flags.sampler_exhausted && !c_.flags.target_reached &&
         c_.book.size() < c_.spec.search().max_trials() && c_.book.size() < limit;
}

bool TrialStates::Finished() const {
  if (!c_.book.queue().empty() || c_.book.running() > 0) return false;
  return c_.scheduler ? c_.flags.schedule_done || c_.flags.interrupted : !CanCreate();
}

std::vector<Observation> TrialStates::ModelHistory() const {
  const TrialBook& book = c_.book;
  return BestFidelityHistory(
      *c_.scheduler, static_cast<int>(c_.space.params.size()), c_.judge.objectives().multi(),
      book.size(), [&book](int64_t id) -> const Params& { return book.at(id).params; },
      [&book](int64_t id) { return book.at(id).row.state == v1::RUNNING; },
      [this](int64_t id) { return c_.judge.Evaluate(c_.book.at(id)).violations; });
}

absl::StatusOr<TrialEntry*> TrialStates::Create() {
  const int64_t number = c_.book.size();
  std::vector<std::string> notes;
  const bool bohb = c_.scheduler && c_.spec.search().scheduler() == v1::Search::BOHB;
  std::vector<Observation> model_history;
  if (bohb) model_history = ModelHistory();
  SampleRequest request{
      number, bohb ? absl::MakeConstSpan(model_history) : absl::MakeConstSpan(c_.book.history()),
      &notes};
  // The spend prices every live instance: read it only when a max_cost makes it count.
  const bool priced = c_.rules.spend && c_.spec.budget().has_max_cost();
  request.budget_used = BudgetUsed(c_.spec, priced ? c_.rules.spend() : 0.0, number);
  absl::StatusOr<Params> params = c_.sampler->Ask(request);
  for (const std::string& note : notes) SEXTANT_RETURN_IF_ERROR(Event("sampler_note", 0, note));
  if (!params.ok()) {
    c_.flags.sampler_exhausted = true;
    bool out_of_range = params.status().code() == absl::StatusCode::kOutOfRange;
    SEXTANT_RETURN_IF_ERROR(Event(out_of_range ? "sampler_exhausted" : "sampler_error", 0,
                                  std::string(params.status().message())));
    return nullptr;
  }
  TrialEntry e;
  e.params = *std::move(params);
  e.row.id = number + 1;
  e.row.state = v1::PENDING;
  e.row.params_json = ParamsToJson(e.params);
  e.row.created_at = c_.judge.Now();
  c_.book.history().emplace_back().params = e.params;
  return &c_.book.Add(std::move(e));
}

absl::StatusOr<TrialEntry*> TrialStates::NextScheduled(double* target, bool* resume, bool* wait) {
  Job job = c_.scheduler->NextJob(CanCreate());
  switch (job.kind) {
    case Job::Kind::kPromote: {
      if (job.trial < 1 || job.trial > c_.book.size()) {
        return absl::InternalError(absl::StrCat("scheduler promoted unknown trial ", job.trial));
      }
      TrialEntry& e = c_.book.at(job.trial);
      e.row.paused = false;
      e.row.target = job.target;
      AppendRung(e.row, e.objective, "promoted");
      SEXTANT_RETURN_IF_ERROR(
          Event("trial_promoted", e.row.id, PromotionMessage(c_.spec, job.target)));
      c_.scheduler->OnStart(e.row.id, job);
      scheduler_known_.insert(e.row.id);
      *target = job.target;
      *resume = true;
      return &e;
    }
    case Job::Kind::kNew: {
      SEXTANT_ASSIGN_OR_RETURN(TrialEntry * e, Create());
      if (e == nullptr) return nullptr;
      c_.scheduler->OnStart(e->row.id, job);
      scheduler_known_.insert(e->row.id);
      *target = job.target;
      return e;
    }
    case Job::Kind::kDone:
      if (c_.book.running() == 0 && c_.book.queue().empty() && !c_.flags.schedule_done) {
        c_.flags.schedule_done = true;
        SEXTANT_RETURN_IF_ERROR(FinalizePaused());
        return nullptr;
      }
      [[fallthrough]];
    case Job::Kind::kWait:
      *wait = true;
      return nullptr;
  }
  return nullptr;
}

void TrialStates::Rescheduled(const TrialEntry& e, double target) {
  if (c_.scheduler && scheduler_known_.insert(e.row.id).second) {
    c_.scheduler->OnStart(e.row.id,
                          Job::New(target > 0 ? target : c_.spec.search().fidelity().max()));
  }
}

// Trials still paused when the schedule ends were never promoted: they are pruned at the rung
// they reached.
absl::Status TrialStates::FinalizePaused() {
  for (TrialEntry& e : c_.book.entries()) {
    if (PrunePausedAtScheduleEnd(e.row, e.objective, c_.judge.Now())) {
      SEXTANT_RETURN_IF_ERROR(c_.store->PutTrial(e.row));
    }
  }
  return Event("schedule_finished", 0, c_.scheduler->Describe());
}

bool TrialStates::TopRung(double target) const {
  return c_.scheduler != nullptr && target > 0 &&
         target >= c_.spec.search().fidelity().max() - 1e-9;
}

absl::Status TrialStates::Park(TrialEntry& e, double target, const std::string& why) {
  e.row.target = target;
  e.row.state = v1::PENDING;
  c_.book.queue().push_back(e.row.id);
  SEXTANT_RETURN_IF_ERROR(c_.store->PutTrial(e.row));
  return Event("placement", e.row.id, why);
}

absl::Status TrialStates::Start(TrialEntry& e, int64_t worker) {
  e.row.state = v1::RUNNING;
  c_.book.SetRunning(e, worker);
  e.attempt_started = c_.judge.Now();
  e.lease_deadline = c_.clock->Now() + absl::Seconds(c_.options.lease_seconds);
  SEXTANT_RETURN_IF_ERROR(c_.store->PutTrial(e.row));
  return c_.store->StartAttempt(e.row.id, e.row.attempts, worker, c_.judge.Now());
}

absl::Status TrialStates::FailToStart(TrialEntry& e, const std::string& error) {
  e.row.state = v1::FAILED;
  e.row.error = error;
  e.row.finished_at = c_.judge.Now();
  c_.book.history()[e.row.id - 1].outcome = Observation::Outcome::kFailed;
  SEXTANT_RETURN_IF_ERROR(c_.store->PutTrial(e.row));
  return Event("trial_failed", e.row.id, e.row.error);
}

absl::Status TrialStates::ObserveFidelity(TrialEntry& e, double fidelity) {
  const std::string& key = c_.spec.search().fidelity().name();
  if (e.attempt_fidelity >= 0 && fidelity < e.attempt_fidelity) {
    if (e.fidelity_error.empty()) {
      e.fidelity_error =
          absl::StrCat("the fidelity '", key, "' went backwards: ", FormatParamValue(fidelity),
                       " after ", FormatParamValue(e.attempt_fidelity));
    }
    return absl::OkStatus();
  }
  e.attempt_fidelity = fidelity;
  e.row.fidelity = std::max(e.row.fidelity, fidelity);
  if (e.action != Decision::Kind::kContinue) return absl::OkStatus();
  Decision d;
  const ObjectiveSet& objectives = c_.judge.objectives();
  if (objectives.multi()) {
    // MO-ASHA ranks on every objective (the built-in cost and trial_seconds as of now).
    const TrialEvaluation ev = c_.judge.Evaluate(e);
    if (!ev.ok()) return absl::OkStatus();
    const std::vector<double> values = objectives.Minimised(ev.values);
    d = c_.scheduler->OnReportValues(e.row.id, fidelity, values, ev.feasible());
  } else {
    if (!e.objective || !std::isfinite(*e.objective)) return absl::OkStatus();
    d = c_.scheduler->OnReport(e.row.id, fidelity, c_.judge.Minimised(*e.objective));
  }
  if (d.kind == Decision::Kind::kContinue) return absl::OkStatus();
  e.action = d.kind;
  e.action_reason = d.reason;
  return absl::OkStatus();
}

absl::Status TrialStates::StoreMeasurements(
    TrialEntry& e, const google::protobuf::RepeatedPtrField<v1::Measurement>& ms) {
  const ObjectiveSet& objectives = c_.judge.objectives();
  const std::string& metric = objectives.objectives()[0].metric();
  for (const v1::Measurement& m : ms) {
    SEXTANT_ASSIGN_OR_RETURN(bool inserted, c_.store->AddMeasurement(MeasurementRow{
                                                e.row.id, e.row.attempts, m.sequence(),
                                                m.elapsed_seconds(), MetricsToJson(m.metrics())}));
    if (!inserted) continue;  // a retried report: already stored once
    if (!m.event().empty()) {
      std::string kind = m.event().substr(0, m.event().find(' '));
      std::string message = kind.size() < m.event().size() ? m.event().substr(kind.size() + 1) : "";
      SEXTANT_RETURN_IF_ERROR(Event(absl::StrCat("trial_", kind), e.row.id, message));
      continue;
    }
    for (const auto& [name, value] : m.metrics()) {
      if (objectives.Mentions(name)) e.latest[name] = value;
      if (e.reported.size() < 64) e.reported.insert(name);  // enough to name in an error
    }
    auto it = m.metrics().find(metric);
    if (it != m.metrics().end()) e.objective = it->second;
    if (c_.scheduler) {
      auto f = m.metrics().find(c_.spec.search().fidelity().name());
      if (f != m.metrics().end() && std::isfinite(f->second)) {
        SEXTANT_RETURN_IF_ERROR(ObserveFidelity(e, f->second));
      }
    }
  }
  return absl::OkStatus();
}

// Long because each way an attempt can end under a scheduler needs its own bookkeeping: the
// scheduler paused it at a rung, pruned it, or it ran to its target by itself.
absl::StatusOr<bool> TrialStates::FinishScheduled(TrialEntry& e,
                                                  const v1::CompleteRequest& request) {
  const std::string& key = c_.spec.search().fidelity().name();
  if (request.checkpoint_missing()) {
    e.row.scratch_restarts += 1;
    SEXTANT_RETURN_IF_ERROR(
        Event("restarted_from_scratch", e.row.id,
              "no checkpoint in SEXTANT_CHECKPOINT_DIR; the trial started over"));
  }
  if (!e.fidelity_error.empty()) return false;  // an ordinary failure, with that reason
  const bool exited_ok =
      request.exit_code() == 0 && !request.timed_out() && request.error().empty();
  const double max = c_.spec.search().fidelity().max();
  bool pause = e.action == Decision::Kind::kPause ||
               (exited_ok && e.row.target > 0 && e.row.target < max &&
                e.row.fidelity >= e.row.target && e.action == Decision::Kind::kContinue);
  if (e.action == Decision::Kind::kStop) {
    SEXTANT_RETURN_IF_ERROR(Prune(e, e.action_reason));
  } else if (pause && e.objective && std::isfinite(*e.objective)) {
    e.row.state = v1::PENDING;
    e.row.paused = true;
    AppendRung(e.row, e.objective, "paused");
    c_.judge.Record(e);
    c_.book.history()[e.row.id - 1] = c_.judge.Observed(e, Observation::Outcome::kPruned);
    c_.scheduler->OnEnd(e.row.id, /*reached_target=*/true);
  } else {
    if (exited_ok && e.attempt_fidelity < 0) {
      SEXTANT_RETURN_IF_ERROR(
          Event("fidelity_missing", e.row.id,
                absl::StrCat("the trial never reported the fidelity key '", key, "' (print '", key,
                             "=N' each step); the scheduler could not stop or pause it")));
    }
    return false;
  }
  SEXTANT_RETURN_IF_ERROR(c_.store->FinishAttempt(
      e.row.id, e.row.attempts, e.row.paused ? v1::ATTEMPT_PAUSED : v1::ATTEMPT_PRUNED,
      request.exit_code(), "", c_.judge.Now()));
  return true;
}

absl::Status TrialStates::Prune(TrialEntry& e, const std::string& why) {
  e.row.state = v1::PRUNED;
  e.row.finished_at = c_.judge.Now();
  if (e.objective && std::isfinite(*e.objective)) e.row.value = *e.objective;
  if (c_.scheduler) AppendRung(e.row, e.objective, "pruned");
  c_.judge.Record(e);
  c_.book.history()[e.row.id - 1] = c_.judge.Observed(e, Observation::Outcome::kPruned);
  if (c_.scheduler) c_.scheduler->OnEnd(e.row.id, /*reached_target=*/false);
  return Event("trial_pruned", e.row.id, why);
}

absl::Status TrialStates::Preempt(TrialEntry& e, const v1::CompleteRequest& request) {
  const int64_t worker = c_.book.ClearRunning(e);
  if (c_.flags.stopping) {
    e.row.state = v1::CANCELLED;
    const std::string why = absl::StrCat("checkpointed and stopped: ", c_.flags.stop_reason);
    SEXTANT_RETURN_IF_ERROR(c_.store->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_CANCELLED,
                                                    request.exit_code(), why, c_.judge.Now()));
    SEXTANT_RETURN_IF_ERROR(
        Event("trial_stopped", e.row.id,
              absl::StrCat(why, "; `sextant resume` continues it from its checkpoint")));
    return c_.store->PutTrial(e.row);
  }
  e.row.preemptions += 1;
  e.row.state = v1::PREEMPTED;
  std::string why = absl::StrCat("worker ", worker, " got a preemption notice");
  if (request.exit_code() != 0) {
    absl::StrAppend(&why, " (the command exited ", request.exit_code(), ")");
  }
  SEXTANT_RETURN_IF_ERROR(c_.store->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_PREEMPTED,
                                                  request.exit_code(), why, c_.judge.Now()));
  // After an interrupt, `sextant resume` requeues it.
  if (!c_.flags.interrupted) c_.book.queue().push_front(e.row.id);
  SEXTANT_RETURN_IF_ERROR(Event("trial_preempted", e.row.id,
                                absl::StrCat(why, "; requeued to resume from its checkpoint")));
  return c_.store->PutTrial(e.row);
}

absl::Status TrialStates::Finish(TrialEntry& e, const v1::CompleteRequest& request) {
  SEXTANT_RETURN_IF_ERROR(StoreMeasurements(e, request.measurements()));
  c_.judge.EndAttemptClock(e);
  if (request.preempted()) return Preempt(e, request);
  // A client's own prune; one the scheduler asked for is the scheduler's (below).
  if (request.pruned() && !(c_.scheduler && e.action == Decision::Kind::kStop)) {
    c_.book.ClearRunning(e);
    SEXTANT_RETURN_IF_ERROR(Prune(e, "pruned by its client"));
    SEXTANT_RETURN_IF_ERROR(c_.store->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_PRUNED,
                                                    request.exit_code(), "", c_.judge.Now()));
    return c_.store->PutTrial(e.row);
  }
  if (c_.scheduler) {
    SEXTANT_ASSIGN_OR_RETURN(bool handled, FinishScheduled(e, request));
    if (handled) {
      c_.book.ClearRunning(e);
      return c_.store->PutTrial(e.row);
    }
  }
  std::string error;
  const TrialEvaluation evaluation = c_.judge.Evaluate(e);
  if (!e.fidelity_error.empty()) {
    error = e.fidelity_error;
  } else if (request.exit_code() != 0 || request.timed_out() || !request.error().empty()) {
    error = request.error().empty() ? absl::StrCat("exited with status ", request.exit_code())
                                    : request.error();
  } else if (!evaluation.ok()) {
    error = evaluation.error;
    if (!evaluation.missing_objective.empty()) {
      absl::StrAppend(&error, e.reported.empty() ? "; it reported no metrics at all"
                                                 : absl::StrCat("; it reported: ",
                                                                absl::StrJoin(e.reported, ", ")));
    }
  }
  c_.book.ClearRunning(e);
  SEXTANT_RETURN_IF_ERROR(error.empty() ? Complete(e, evaluation, request.exit_code())
                                        : Fail(e, error, request.exit_code()));
  return c_.store->PutTrial(e.row);
}

absl::Status TrialStates::Complete(TrialEntry& e, const TrialEvaluation& evaluation,
                                   int exit_code) {
  e.row.state = v1::COMPLETED;
  e.row.value = evaluation.values[0];
  e.row.error.clear();
  e.row.finished_at = c_.judge.Now();
  const double v = evaluation.values[0];
  c_.judge.Record(e);
  c_.book.history()[e.row.id - 1] = c_.judge.Observed(e, Observation::Outcome::kCompleted);
  for (const std::string& missing : evaluation.missing_constraints) {
    SEXTANT_RETURN_IF_ERROR(Event("constraint_missing", e.row.id,
                                  absl::StrCat("the trial never reported the constraint metric '",
                                               missing, "'; it is infeasible")));
  }
  if (!c_.judge.objectives().multi() && c_.spec.objective().has_target() && evaluation.feasible() &&
      !c_.judge.Better(c_.spec.objective().target(), v) && !c_.flags.target_reached) {
    c_.flags.target_reached = true;
    SEXTANT_RETURN_IF_ERROR(
        Event("target_reached", e.row.id,
              absl::StrCat(c_.judge.objectives().objectives()[0].metric(), "=", v)));
  }
  if (c_.scheduler) {
    AppendRung(e.row, e.objective, "completed");
    c_.scheduler->OnEnd(e.row.id, /*reached_target=*/true);
  }
  return c_.store->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_COMPLETED, exit_code, "",
                                 c_.judge.Now());
}

absl::Status TrialStates::Fail(TrialEntry& e, const std::string& error, int exit_code) {
  e.row.failures += 1;
  e.row.error = error;
  SEXTANT_RETURN_IF_ERROR(c_.store->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_FAILED,
                                                  exit_code, error, c_.judge.Now()));
  if (e.row.failures <= c_.spec.trial().max_restarts() && !c_.flags.interrupted) {
    e.row.state = v1::PENDING;
    c_.book.queue().push_back(e.row.id);
    return Event("trial_restarted", e.row.id, error);
  }
  e.row.state = v1::FAILED;
  e.row.finished_at = c_.judge.Now();
  c_.book.history()[e.row.id - 1].outcome = Observation::Outcome::kFailed;
  if (c_.scheduler) c_.scheduler->OnEnd(e.row.id, /*reached_target=*/false);
  SEXTANT_RETURN_IF_ERROR(Event("trial_failed", e.row.id, error));
  // The failure policy: only a run that launches its trials, and once.
  if (c_.spec.search().mode() != v1::Search::ASK_TELL && !c_.flags.failure_stop) {
    c_.flags.failure_stop =
        FailureBoundsPassed(c_.book, c_.spec.search(), c_.flags.session_started);
  }
  return absl::OkStatus();
}

absl::Status TrialStates::Lose(TrialEntry& e, const std::string& kind, const std::string& why) {
  SEXTANT_RETURN_IF_ERROR(
      c_.store->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_LOST, -1, why, c_.judge.Now()));
  SEXTANT_RETURN_IF_ERROR(Event(kind, e.row.id, why));
  e.row.state = v1::PENDING;
  c_.book.ClearRunning(e);
  c_.judge.EndAttemptClock(e);
  c_.book.queue().push_front(e.row.id);
  return c_.store->PutTrial(e.row);
}

absl::Status TrialStates::CancelRunning() {
  int cancelled = 0;
  for (TrialEntry* e : c_.book.Running()) {
    SEXTANT_RETURN_IF_ERROR(c_.store->FinishAttempt(
        e->row.id, e->row.attempts, v1::ATTEMPT_CANCELLED, -1, "run interrupted", c_.judge.Now()));
    e->row.state = v1::CANCELLED;
    c_.book.ClearRunning(*e);
    c_.judge.EndAttemptClock(*e);
    ++cancelled;
    SEXTANT_RETURN_IF_ERROR(c_.store->PutTrial(e->row));
  }
  return Event("run_interrupted", 0, absl::StrCat(cancelled, " running trials cancelled"));
}

}  // namespace sextant
