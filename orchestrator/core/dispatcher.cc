#include "orchestrator/core/dispatcher.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_line.h"
#include "common/ids.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/rung_record.h"
#include "orchestrator/core/trial_command.h"
#include "sextant/v1/worker_service.pb.h"
#include "strategies/pareto.h"

namespace sextant {
namespace {

std::string FormatValue(double v) { return absl::StrCat(v); }

}  // namespace

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

Dispatcher::Dispatcher(v1::ExperimentSpec spec, Store* store, std::unique_ptr<Sampler> sampler,
                       Clock* clock, DispatcherOptions options,
                       std::unique_ptr<Scheduler> scheduler)
    : spec_(std::move(spec)),
      objectives_(spec_),
      space_(ToSearchSpace(spec_)),
      store_(store),
      sampler_(std::move(sampler)),
      scheduler_(std::move(scheduler)),
      bohb_(spec_.search().scheduler() == v1::Search::BOHB),
      clock_(clock),
      options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Dispatcher>> Dispatcher::Create(
    v1::ExperimentSpec spec, Store* store, std::unique_ptr<Sampler> sampler, Clock* clock,
    DispatcherOptions options, std::unique_ptr<Scheduler> scheduler) {
  std::unique_ptr<Dispatcher> d(new Dispatcher(std::move(spec), store, std::move(sampler), clock,
                                               std::move(options), std::move(scheduler)));
  SEXTANT_RETURN_IF_ERROR(d->Load());
  return d;
}

double Dispatcher::Now() const { return absl::ToDoubleSeconds(clock_->Now() - absl::UnixEpoch()); }

template <typename F>
auto Dispatcher::InTransaction(F&& f) -> decltype(f()) {
  // Inside a caller's transaction (ask/tell records its lease with the change), the caller
  // commits or rolls back both.
  if (store_->InTransaction()) return f();
  SEXTANT_RETURN_IF_ERROR(store_->Begin());
  auto result = f();
  if (!result.ok()) {
    store_->Rollback();
    return result;
  }
  SEXTANT_RETURN_IF_ERROR(store_->Commit());
  return result;
}

absl::Status Dispatcher::Event(const std::string& kind, int64_t trial_id,
                               const std::string& message) {
  return store_->AddEvent(Now(), kind, trial_id, message);
}

// Rebuilds the in-memory queue from the store. Long because it also repairs what a crash
// left behind: attempts that were running are closed as lost and their trials requeued.
absl::Status Dispatcher::Load() {
  session_started_ = Now();
  SEXTANT_ASSIGN_OR_RETURN(std::vector<TrialRow> rows, store_->LoadTrials());
  SEXTANT_ASSIGN_OR_RETURN(std::vector<MeasurementRow> ms, store_->LoadMeasurements());
  SEXTANT_ASSIGN_OR_RETURN(next_worker_id_, store_->MaxWorkerId());
  ++next_worker_id_;
  SEXTANT_RETURN_IF_ERROR(store_->Begin());
  int held = 0;
  for (TrialRow& row : rows) {
    if (row.id != static_cast<int64_t>(trials_.size()) + 1) {
      store_->Rollback();
      return absl::DataLossError(absl::StrCat("store: trial ids are not contiguous at ", row.id));
    }
    Entry e;
    SEXTANT_ASSIGN_OR_RETURN(e.params, ParamsFromJson(row.params_json, space_));
    bool lapsed = false;
    if (row.state == v1::RUNNING && KeepHeldOnLoad(e, row, &lapsed)) {
      ++held;
    } else if (!TrialEnded(row.state)) {
      // A fresh scheduler knows nothing of paused trials: they continue to their last target.
      row.paused = false;
      if (row.state == v1::RUNNING) {
        SEXTANT_RETURN_IF_ERROR(store_->FinishAttempt(
            row.id, row.attempts, v1::ATTEMPT_LOST, -1,
            lapsed ? absl::StrCat("lease lapsed (not told within ", options_.lease_seconds, "s)")
                   : "orchestrator stopped",
            Now()));
      }
      row.state = v1::PENDING;
      SEXTANT_RETURN_IF_ERROR(store_->PutTrial(row));
      queue_.push_back(row.id);
    }
    e.row = std::move(row);
    trials_.push_back(std::move(e));
  }
  for (const MeasurementRow& m : ms) {
    if (m.trial_id < 1 || m.trial_id > static_cast<int64_t>(trials_.size())) continue;
    nlohmann::json j = nlohmann::json::parse(m.metrics_json, nullptr, false);
    if (!j.is_object()) continue;
    Entry& e = trials_[m.trial_id - 1];
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_number() && objectives_.Mentions(it.key())) {
        e.latest[it.key()] = it.value().get<double>();
      }
      if (e.reported.size() < 64) e.reported.insert(it.key());
    }
  }
  for (Entry& e : trials_) {
    auto first = e.latest.find(objectives_.objectives()[0].metric());
    if (first != e.latest.end()) e.objective = first->second;
    Observation o;
    o.params = e.params;
    if (e.row.state == v1::COMPLETED && e.row.value) {
      o = ObservedAs(e, Observation::Outcome::kCompleted);
    } else if (e.row.state == v1::FAILED) {
      o.outcome = Observation::Outcome::kFailed;
    }
    history_.push_back(std::move(o));
  }
  if (!trials_.empty() && !(options_.quiet_load && queue_.empty())) {
    SEXTANT_RETURN_IF_ERROR(Event(
        "run_resumed", 0,
        absl::StrCat(trials_.size(), " trials stored, ", queue_.size(), " requeued",
                     held > 0 ? absl::StrCat(", ", held, " still held by their askers") : "")));
  }
  SEXTANT_RETURN_IF_ERROR(store_->SetRunState(v1::RUN_RUNNING));
  return store_->Commit();
}

bool Dispatcher::KeepHeldOnLoad(Entry& e, const TrialRow& row, bool* lapsed) {
  auto it = options_.held_leases.find(row.id);
  if (it == options_.held_leases.end() || it->second.attempt != row.attempts) return false;
  const HeldLease& lease = it->second;
  if (lease.deadline <= clock_->Now()) {
    *lapsed = true;
    return false;
  }
  e.row.id = row.id;  // SetRunning keys on it; the caller copies the whole row in next
  SetRunning(e, lease.worker_id);
  e.lease_deadline = lease.deadline;
  e.attempt_started = lease.started;
  if (scheduler_) {
    // The fresh scheduler learns of the running attempt as if it had just started.
    scheduler_->OnStart(row.id,
                        Job::New(row.target > 0 ? row.target : spec_.search().fidelity().max()));
    scheduler_known_.insert(row.id);
  }
  return true;
}

bool Dispatcher::Better(double a, double b) const {
  return objectives_.objectives()[0].goal() == v1::Objective::MAXIMIZE ? a > b : a < b;
}

bool Dispatcher::CanCreate() const {
  return !interrupted_ && !sampler_exhausted_ && !target_reached_ &&
         static_cast<int>(trials_.size()) < spec_.search().max_trials() &&
         static_cast<int64_t>(trials_.size()) < CreateLimit();
}

bool Dispatcher::Finished() const {
  if (!queue_.empty() || running_ > 0) return false;
  return scheduler_ ? scheduler_done_ || interrupted_ : !CanCreate();
}

int MaxFailedTrials(const v1::Search& search) {
  if (search.max_failed_trials() > 0) return search.max_failed_trials();
  return std::max(5, (search.max_trials() + 4) / 5);
}

int MaxFailedInARow(const v1::Search& search) {
  return search.max_failed_in_a_row() > 0 ? search.max_failed_in_a_row() : 5;
}

namespace {
// A trial's error as a run-ending message quotes it: one line, at most 300 characters.
std::string Quote(const std::string& error) { return absl::StrCat("\"", ErrorLine(error), "\""); }
}  // namespace

std::optional<std::string> Dispatcher::FailureStop() const {
  if (failure_stop_ || spec_.search().mode() == v1::Search::ASK_TELL || !Finished()) {
    return failure_stop_;
  }
  const Entry* last = nullptr;  // the trial that failed last
  int failed = 0;
  for (const Entry& e : trials_) {
    if (e.row.state == v1::COMPLETED || e.row.state == v1::PRUNED) return std::nullopt;
    if (e.row.state != v1::FAILED) continue;
    ++failed;
    if (last == nullptr || e.row.finished_at >= last->row.finished_at) last = &e;
  }
  if (last == nullptr) return std::nullopt;
  return absl::StrCat("every trial failed (", failed, " of ", failed,
                      "); the last error: ", Quote(last->row.error), " (trial ", last->row.id, ")");
}

void Dispatcher::UpdateFailureStop() {
  if (spec_.search().mode() == v1::Search::ASK_TELL || failure_stop_) return;
  // Only this session's trials count: a run resumed once its cause is fixed goes on.
  std::vector<const TrialRow*> ended;
  int failed = 0;
  for (const Entry& e : trials_) {
    if (!TrialEnded(e.row.state) || e.row.finished_at < session_started_) continue;
    ended.push_back(&e.row);
    failed += e.row.state == v1::FAILED;
  }
  if (failed == 0) return;
  std::stable_sort(ended.begin(), ended.end(), [](const TrialRow* a, const TrialRow* b) {
    return a->finished_at > b->finished_at;
  });
  const TrialRow* last = nullptr;  // the trial that failed last
  int in_a_row = 0;
  for (const TrialRow* r : ended) {
    if (r->state != v1::FAILED || (last != nullptr && r->error != last->error)) break;
    if (last == nullptr) last = r;
    ++in_a_row;
  }
  if (last == nullptr) {  // the latest ended trial succeeded: quote the latest failure
    for (const TrialRow* r : ended) {
      if (r->state == v1::FAILED) {
        last = r;
        break;
      }
    }
  }
  const std::string quoted = absl::StrCat(Quote(last->error), " (trial ", last->id, ")");
  const v1::Search& search = spec_.search();
  if (in_a_row >= MaxFailedInARow(search)) {
    failure_stop_ = absl::StrCat(in_a_row, " trials in a row failed with the same error: ", quoted,
                                 " (search.max_failed_in_a_row: ", MaxFailedInARow(search), ")");
  } else if (failed >= MaxFailedTrials(search)) {
    failure_stop_ =
        absl::StrCat(failed, " trials failed (search.max_failed_trials: ", MaxFailedTrials(search),
                     "); the last error: ", quoted);
  }
}

double Dispatcher::Minimised(double v) const {
  return objectives_.objectives()[0].goal() == v1::Objective::MAXIMIZE ? -v : v;
}

TrialEvaluation Dispatcher::EvaluateNow(const Entry& e) const {
  double seconds = e.row.seconds;
  if (e.attempt_started > 0) seconds += std::max(0.0, Now() - e.attempt_started);
  return objectives_.Evaluate(e.latest, TrialCost(e.row.id), seconds);
}

void Dispatcher::EndAttemptClock(Entry& e) {
  if (e.attempt_started > 0) e.row.seconds += std::max(0.0, Now() - e.attempt_started);
  e.attempt_started = 0;
}

void Dispatcher::RecordOutcome(Entry& e) const {
  const TrialEvaluation ev = EvaluateNow(e);
  if (objectives_.multi()) e.row.values = ev.values;
  e.row.feasible = ev.feasible();
  e.row.violations = ev.violations;
  e.row.cost = TrialCost(e.row.id);
}

// From the stored row alone, so that a resumed run's sampler sees what the first session saw
// (the ledger of an earlier session is not live when the store is loaded).
Observation Dispatcher::ObservedAs(const Entry& e, Observation::Outcome outcome) const {
  TrialEvaluation ev;
  if (objectives_.multi()) {
    ev.values = e.row.values;
  } else if (e.row.value) {
    ev.values = {*e.row.value};
  }
  ev.violations = e.row.violations;
  if (ev.violations.size() != objectives_.constraints().size()) {
    // A row from before violations were stored: what is known is whether it was feasible.
    ev.violations.assign(objectives_.constraints().size(),
                         e.row.feasible ? 0.0 : std::numeric_limits<double>::infinity());
  }
  return objectives_.ToObservation(e.params, outcome, ev, e.row.cost);
}

void Dispatcher::AddRung(Entry& e, const std::string& decision) {
  AppendRung(e.row, e.objective, decision);
}

v1::TrialAction Dispatcher::ActionFor(const Entry& e) const {
  if (interrupted_ || e.action == Decision::Kind::kStop || !e.fidelity_error.empty()) {
    return v1::ACTION_STOP;
  }
  if (stopping_) return v1::ACTION_NOTICE;  // the budget wind-down: checkpoint and hand it back
  return e.action == Decision::Kind::kPause ? v1::ACTION_PAUSE : v1::ACTION_CONTINUE;
}

// BOHB fits its model on the highest fidelity that has enough observations, not on whatever
// fidelity each trial happened to reach.
std::vector<Observation> Dispatcher::ModelHistory() const {
  return BestFidelityHistory(
      *scheduler_, static_cast<int>(space_.params.size()), objectives_.multi(),
      static_cast<int64_t>(trials_.size()),
      [this](int64_t id) -> const Params& { return trials_[id - 1].params; },
      [this](int64_t id) { return trials_[id - 1].row.state == v1::RUNNING; },
      [this](int64_t id) { return EvaluateNow(trials_[id - 1]).violations; });
}

absl::Status Dispatcher::CheckRegistration(const v1::RegisterRequest& request) const {
  // Bounded before anything is kept: every field is stored and shown.
  for (const auto& [field, id] :
       {std::pair{"region", &request.region()}, std::pair{"pool", &request.pool()},
        std::pair{"launch_token", &request.launch_token()}}) {
    if (!id->empty()) SEXTANT_RETURN_IF_ERROR(CheckId(field, *id));
  }
  if (request.hostname().size() > kMaxHostnameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("hostname is ", request.hostname().size(),
                                                   " bytes; at most ", kMaxHostnameBytes));
  }
  // A pool of the run is billed at its region's price: only a worker of that region joins it.
  for (const v1::Pool& pool : spec_.resources().pools()) {
    if (pool.name() == request.pool() && pool.region() != request.region()) {
      return absl::PermissionDeniedError(absl::StrCat("pool ", pool.name(), " is in region ",
                                                      pool.region(), "; a worker of region ",
                                                      request.region(), " may not join it"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::RegisterResponse> Dispatcher::Register(const v1::RegisterRequest& request) {
  if (request.protocol_version() != v1::PROTOCOL_VERSION_CURRENT) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker speaks protocol version ", request.protocol_version(),
        " but this orchestrator speaks ", static_cast<int>(v1::PROTOCOL_VERSION_CURRENT),
        "; use matching sextant and sextant-worker binaries"));
  }
  SEXTANT_RETURN_IF_ERROR(CheckRegistration(request));
  int64_t id = next_worker_id_++;
  workers_[id] = WorkerInfo{request.region(), request.pool(), request.launch_token()};
  SEXTANT_RETURN_IF_ERROR(InTransaction([&]() -> absl::Status {
    SEXTANT_RETURN_IF_ERROR(store_->AddWorker(id, request.region(), request.pool(),
                                              request.hostname(), request.pid(), Now()));
    return Event("worker_registered", 0,
                 absl::StrCat("worker ", id, " region=", request.region(), " pool=", request.pool(),
                              " host=", request.hostname(), " pid=", request.pid()));
  }));
  v1::RegisterResponse response;
  response.set_worker_id(id);
  response.set_experiment(spec_.name());
  response.set_lease_seconds(options_.lease_seconds);
  response.set_heartbeat_seconds(options_.heartbeat_seconds);
  response.set_log_dir(options_.logs_dir);
  response.set_checkpoint_root(options_.checkpoints_dir);
  response.set_working_dir(options_.working_dir);
  return response;
}

absl::StatusOr<v1::LeaseResponse> Dispatcher::Lease(int64_t worker_id) {
  return InTransaction([&] { return LeaseInTx(worker_id); });
}

absl::StatusOr<Dispatcher::Entry*> Dispatcher::CreateTrialInTx() {
  int64_t number = static_cast<int64_t>(trials_.size());
  std::vector<std::string> notes;
  std::vector<Observation> model_history;
  if (bohb_ && scheduler_) model_history = ModelHistory();
  SampleRequest request{
      number,
      bohb_ && scheduler_ ? absl::MakeConstSpan(model_history) : absl::MakeConstSpan(history_),
      &notes};
  // The spend prices every live instance: read it only when a max_cost makes it count.
  const bool priced = rules_.spend && spec_.budget().has_max_cost();
  request.budget_used = BudgetUsed(spec_, priced ? rules_.spend() : 0.0, number);
  absl::StatusOr<Params> params = sampler_->Ask(request);
  for (const std::string& note : notes) SEXTANT_RETURN_IF_ERROR(Event("sampler_note", 0, note));
  if (!params.ok()) {
    sampler_exhausted_ = true;
    bool out_of_range = params.status().code() == absl::StatusCode::kOutOfRange;
    SEXTANT_RETURN_IF_ERROR(Event(out_of_range ? "sampler_exhausted" : "sampler_error", 0,
                                  std::string(params.status().message())));
    return nullptr;
  }
  Entry e;
  e.params = *std::move(params);
  e.row.id = number + 1;
  e.row.state = v1::PENDING;
  e.row.params_json = ParamsToJson(e.params);
  e.row.created_at = Now();
  history_.emplace_back().params = e.params;
  trials_.push_back(std::move(e));
  return &trials_.back();
}

absl::StatusOr<v1::LeaseResponse> Dispatcher::LeaseInTx(int64_t worker_id) {
  v1::LeaseResponse response;
  while (true) {
    if (interrupted_ || stopping_ || Finished() || retired_.count(worker_id)) {
      response.set_done(true);
      return response;
    }
    // The failure policy has ended the run: the orchestrator's loop winds it down.
    if (failure_stop_ || hold_ || running_ >= std::max(1, spec_.search().max_concurrent())) break;
    if (rules_.lease_gate && !rules_.lease_gate(*this)) break;
    Entry* e = nullptr;
    double target = 0;
    bool resume = false;
    const bool low_only = LowRungsOnly(worker_id);
    if (!queue_.empty() && (e = TakeQueued(low_only)) != nullptr) {
      target = e->row.target;
      resume = e->row.attempts > 0;
      // After a resume the scheduler is new: it learns of requeued trials as they restart.
      if (scheduler_ && scheduler_known_.insert(e->row.id).second) {
        scheduler_->OnStart(e->row.id,
                            Job::New(target > 0 ? target : spec_.search().fidelity().max()));
      }
    } else if (scheduler_) {
      bool wait = false;
      // Jobs parked for other pools hold their slots.
      if (running_ + static_cast<int>(queue_.size()) >=
          std::max(1, spec_.search().max_concurrent()))
        break;
      SEXTANT_ASSIGN_OR_RETURN(e, NextScheduledInTx(&target, &resume, &wait));
      if (wait) break;
      if (e == nullptr) continue;  // a new trial could not be made, or the schedule ended
      if (low_only && TopRung(target)) {
        // Not on this worker's pool: the job waits for a worker of a pool placement allows.
        e->row.target = target;
        e->row.state = v1::PENDING;
        queue_.push_back(e->row.id);
        SEXTANT_RETURN_IF_ERROR(store_->PutTrial(e->row));
        SEXTANT_RETURN_IF_ERROR(
            Event("placement", e->row.id,
                  absl::StrCat("top rung (", spec_.search().fidelity().name(), "=",
                               FormatParamValue(target), ") waits for a worker off pool ",
                               workers_[worker_id].pool, ": ", rules_.top_rung_why)));
        break;
      }
    } else if (CanCreate()) {
      SEXTANT_ASSIGN_OR_RETURN(e, CreateTrialInTx());
      if (e == nullptr) continue;  // the sampler ran dry; maybe we are done now
    } else {
      break;
    }
    e->row.attempts += 1;
    e->row.target = target;
    e->action = Decision::Kind::kContinue;
    e->action_reason.clear();
    e->attempt_fidelity = -1;
    e->fidelity_error.clear();
    AssignmentContext context{e->row.id, e->row.attempts,
                              options_.checkpoints_dir.empty()
                                  ? ""
                                  : absl::StrCat(options_.checkpoints_dir, "/trial-", e->row.id),
                              options_.federated_trial_flags};
    absl::StatusOr<v1::Assignment> a = BuildAssignment(spec_, space_, e->params, context);
    if (!a.ok()) {
      e->row.state = v1::FAILED;
      e->row.error = std::string(a.status().message());
      e->row.finished_at = Now();
      history_[e->row.id - 1].outcome = Observation::Outcome::kFailed;
      SEXTANT_RETURN_IF_ERROR(store_->PutTrial(e->row));
      SEXTANT_RETURN_IF_ERROR(Event("trial_failed", e->row.id, e->row.error));
      continue;
    }
    if (TopRung(target) && !rules_.top_rung_barred.empty()) {
      SEXTANT_RETURN_IF_ERROR(
          Event("placement", e->row.id,
                absl::StrCat("top rung (", spec_.search().fidelity().name(), "=",
                             FormatParamValue(target), ") runs on worker ", worker_id, " of pool ",
                             workers_[worker_id].pool, ": ", rules_.top_rung_why)));
    }
    e->row.state = v1::RUNNING;
    SetRunning(*e, worker_id);
    e->attempt_started = Now();
    e->lease_deadline = clock_->Now() + absl::Seconds(options_.lease_seconds);
    SEXTANT_RETURN_IF_ERROR(store_->PutTrial(e->row));
    SEXTANT_RETURN_IF_ERROR(store_->StartAttempt(e->row.id, e->row.attempts, worker_id, Now()));
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

// Asks the scheduler what a free worker should do. Sets *wait when nothing can start now;
// returns null (without *wait) when the caller should look again (e.g. the schedule ended).
absl::StatusOr<Dispatcher::Entry*> Dispatcher::NextScheduledInTx(double* target, bool* resume,
                                                                 bool* wait) {
  Job job = scheduler_->NextJob(CanCreate());
  switch (job.kind) {
    case Job::Kind::kPromote: {
      if (job.trial < 1 || job.trial > static_cast<int64_t>(trials_.size())) {
        return absl::InternalError(absl::StrCat("scheduler promoted unknown trial ", job.trial));
      }
      Entry& e = trials_[job.trial - 1];
      e.row.paused = false;
      e.row.target = job.target;
      AddRung(e, "promoted");
      SEXTANT_RETURN_IF_ERROR(
          Event("trial_promoted", e.row.id, PromotionMessage(spec_, job.target)));
      scheduler_->OnStart(e.row.id, job);
      scheduler_known_.insert(e.row.id);
      *target = job.target;
      *resume = true;
      return &e;
    }
    case Job::Kind::kNew: {
      SEXTANT_ASSIGN_OR_RETURN(Entry * e, CreateTrialInTx());
      if (e == nullptr) return nullptr;
      scheduler_->OnStart(e->row.id, job);
      scheduler_known_.insert(e->row.id);
      *target = job.target;
      return e;
    }
    case Job::Kind::kDone:
      if (running_ == 0 && queue_.empty() && !scheduler_done_) {
        scheduler_done_ = true;
        SEXTANT_RETURN_IF_ERROR(FinalizePausedInTx());
        return nullptr;
      }
      [[fallthrough]];
    case Job::Kind::kWait:
      *wait = true;
      return nullptr;
  }
  return nullptr;
}

// Trials still paused when the schedule ends were never promoted: they are pruned at the rung
// they reached.
absl::Status Dispatcher::FinalizePausedInTx() {
  for (Entry& e : trials_) {
    if (PrunePausedAtScheduleEnd(e.row, e.objective, Now())) {
      SEXTANT_RETURN_IF_ERROR(store_->PutTrial(e.row));
    }
  }
  return Event("schedule_finished", 0, scheduler_->Describe());
}

absl::StatusOr<Dispatcher::Entry*> Dispatcher::Current(int64_t trial_id, int attempt,
                                                       int64_t worker_id) {
  if (trial_id < 1 || trial_id > static_cast<int64_t>(trials_.size())) {
    return absl::NotFoundError(absl::StrCat("no trial ", trial_id));
  }
  Entry& e = trials_[trial_id - 1];
  if (e.row.state != v1::RUNNING || e.row.attempts != attempt || e.worker_id != worker_id) {
    return absl::AbortedError(absl::StrCat("trial ", trial_id, " attempt ", attempt,
                                           " no longer holds the lease (stale)"));
  }
  return &e;
}

absl::StatusOr<v1::TrialAction> Dispatcher::Heartbeat(const v1::HeartbeatRequest& request) {
  telemetry_.push_back(TelemetryRow{Now(), request.worker_id(), request.trial_id(),
                                    request.cpu_percent(), request.rss_bytes(), request.gpu_count(),
                                    request.gpu_utilization(), request.gpu_memory_bytes(),
                                    request.gpu_memory_total_bytes()});
  if (request.trial_id() == 0) return v1::ACTION_CONTINUE;
  SEXTANT_ASSIGN_OR_RETURN(Entry * e,
                           Current(request.trial_id(), request.attempt(), request.worker_id()));
  e->lease_deadline = clock_->Now() + absl::Seconds(options_.lease_seconds);
  return ActionFor(*e);
}

absl::Status Dispatcher::ObserveFidelityInTx(Entry& e, double fidelity) {
  const std::string& key = spec_.search().fidelity().name();
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
  if (objectives_.multi()) {
    // MO-ASHA ranks on every objective (the built-in cost and trial_seconds as of now).
    const TrialEvaluation ev = EvaluateNow(e);
    if (!ev.ok()) return absl::OkStatus();
    const std::vector<double> values = objectives_.Minimised(ev.values);
    d = scheduler_->OnReportValues(e.row.id, fidelity, values, ev.feasible());
  } else {
    if (!e.objective || !std::isfinite(*e.objective)) return absl::OkStatus();
    d = scheduler_->OnReport(e.row.id, fidelity, Minimised(*e.objective));
  }
  if (d.kind == Decision::Kind::kContinue) return absl::OkStatus();
  e.action = d.kind;
  e.action_reason = d.reason;
  return absl::OkStatus();
}

absl::Status Dispatcher::StoreMeasurementsInTx(
    Entry& e, const google::protobuf::RepeatedPtrField<v1::Measurement>& ms) {
  const std::string& metric = objectives_.objectives()[0].metric();
  for (const v1::Measurement& m : ms) {
    SEXTANT_ASSIGN_OR_RETURN(bool inserted, store_->AddMeasurement(MeasurementRow{
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
      if (objectives_.Mentions(name)) e.latest[name] = value;
      if (e.reported.size() < 64) e.reported.insert(name);  // enough to name in an error
    }
    auto it = m.metrics().find(metric);
    if (it != m.metrics().end()) e.objective = it->second;
    if (scheduler_) {
      auto f = m.metrics().find(spec_.search().fidelity().name());
      if (f != m.metrics().end() && std::isfinite(f->second)) {
        SEXTANT_RETURN_IF_ERROR(ObserveFidelityInTx(e, f->second));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::TrialAction> Dispatcher::Report(const v1::ReportRequest& request) {
  return InTransaction([&]() -> absl::StatusOr<v1::TrialAction> {
    v1::TrialAction action = interrupted_ ? v1::ACTION_STOP : v1::ACTION_CONTINUE;
    for (const v1::Measurement& m : request.measurements()) {
      SEXTANT_ASSIGN_OR_RETURN(Entry * e, Current(m.trial_id(), m.attempt(), request.worker_id()));
      google::protobuf::RepeatedPtrField<v1::Measurement> one;
      *one.Add() = m;
      SEXTANT_RETURN_IF_ERROR(StoreMeasurementsInTx(*e, one));
      e->lease_deadline = clock_->Now() + absl::Seconds(options_.lease_seconds);
      action = ActionFor(*e);
    }
    return action;
  });
}

// Long because each way an attempt can end under a scheduler needs its own bookkeeping: the
// scheduler paused it at a rung, pruned it, or it ran to its target by itself.
absl::StatusOr<bool> Dispatcher::FinishScheduledInTx(Entry& e, const v1::CompleteRequest& request) {
  const std::string& key = spec_.search().fidelity().name();
  if (request.checkpoint_missing()) {
    e.row.scratch_restarts += 1;
    SEXTANT_RETURN_IF_ERROR(
        Event("restarted_from_scratch", e.row.id,
              "no checkpoint in SEXTANT_CHECKPOINT_DIR; the trial started over"));
  }
  if (!e.fidelity_error.empty()) return false;  // an ordinary failure, with that reason
  const bool exited_ok =
      request.exit_code() == 0 && !request.timed_out() && request.error().empty();
  const double max = spec_.search().fidelity().max();
  bool pause = e.action == Decision::Kind::kPause ||
               (exited_ok && e.row.target > 0 && e.row.target < max &&
                e.row.fidelity >= e.row.target && e.action == Decision::Kind::kContinue);
  if (e.action == Decision::Kind::kStop) {
    SEXTANT_RETURN_IF_ERROR(PruneInTx(e, e.action_reason));
  } else if (pause && e.objective && std::isfinite(*e.objective)) {
    e.row.state = v1::PENDING;
    e.row.paused = true;
    AddRung(e, "paused");
    RecordOutcome(e);
    history_[e.row.id - 1] = ObservedAs(e, Observation::Outcome::kPruned);
    scheduler_->OnEnd(e.row.id, /*reached_target=*/true);
  } else {
    if (exited_ok && e.attempt_fidelity < 0) {
      SEXTANT_RETURN_IF_ERROR(
          Event("fidelity_missing", e.row.id,
                absl::StrCat("the trial never reported the fidelity key '", key, "' (print '", key,
                             "=N' each step); the scheduler could not stop or pause it")));
    }
    return false;
  }
  SEXTANT_RETURN_IF_ERROR(store_->FinishAttempt(
      e.row.id, e.row.attempts, e.row.paused ? v1::ATTEMPT_PAUSED : v1::ATTEMPT_PRUNED,
      request.exit_code(), "", Now()));
  return true;
}

absl::Status Dispatcher::PruneInTx(Entry& e, const std::string& why) {
  e.row.state = v1::PRUNED;
  e.row.finished_at = Now();
  if (e.objective && std::isfinite(*e.objective)) e.row.value = *e.objective;
  if (scheduler_) AddRung(e, "pruned");
  RecordOutcome(e);
  history_[e.row.id - 1] = ObservedAs(e, Observation::Outcome::kPruned);
  if (scheduler_) scheduler_->OnEnd(e.row.id, /*reached_target=*/false);
  return Event("trial_pruned", e.row.id, why);
}

absl::Status Dispatcher::PreemptInTx(Entry& e, const v1::CompleteRequest& request) {
  const int64_t worker = ClearRunning(e);
  if (stopping_) {
    e.row.state = v1::CANCELLED;
    const std::string why = absl::StrCat("checkpointed and stopped: ", stop_reason_);
    SEXTANT_RETURN_IF_ERROR(store_->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_CANCELLED,
                                                  request.exit_code(), why, Now()));
    SEXTANT_RETURN_IF_ERROR(
        Event("trial_stopped", e.row.id,
              absl::StrCat(why, "; `sextant resume` continues it from its checkpoint")));
    return store_->PutTrial(e.row);
  }
  e.row.preemptions += 1;
  e.row.state = v1::PREEMPTED;
  std::string why = absl::StrCat("worker ", worker, " got a preemption notice");
  if (request.exit_code() != 0)
    absl::StrAppend(&why, " (the command exited ", request.exit_code(), ")");
  SEXTANT_RETURN_IF_ERROR(store_->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_PREEMPTED,
                                                request.exit_code(), why, Now()));
  if (!interrupted_) queue_.push_front(e.row.id);  // after an interrupt, resume requeues it
  SEXTANT_RETURN_IF_ERROR(Event("trial_preempted", e.row.id,
                                absl::StrCat(why, "; requeued to resume from its checkpoint")));
  return store_->PutTrial(e.row);
}

absl::Status Dispatcher::FlushTelemetry() {
  if (telemetry_.empty()) return absl::OkStatus();
  SEXTANT_RETURN_IF_ERROR(InTransaction([&]() -> absl::Status {
    for (const TelemetryRow& t : telemetry_) SEXTANT_RETURN_IF_ERROR(store_->AddTelemetry(t));
    return absl::OkStatus();
  }));
  telemetry_.clear();
  telemetry_flushed_ = clock_->Now();
  return absl::OkStatus();
}

absl::Status Dispatcher::FinishInTx(Entry& e, const v1::CompleteRequest& request) {
  SEXTANT_RETURN_IF_ERROR(StoreMeasurementsInTx(e, request.measurements()));
  EndAttemptClock(e);
  if (request.preempted()) return PreemptInTx(e, request);
  // A client's own prune; one the scheduler asked for is the scheduler's (below).
  if (request.pruned() && !(scheduler_ && e.action == Decision::Kind::kStop)) {
    ClearRunning(e);
    SEXTANT_RETURN_IF_ERROR(PruneInTx(e, "pruned by its client"));
    SEXTANT_RETURN_IF_ERROR(store_->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_PRUNED,
                                                  request.exit_code(), "", Now()));
    return store_->PutTrial(e.row);
  }
  if (scheduler_) {
    SEXTANT_ASSIGN_OR_RETURN(bool handled, FinishScheduledInTx(e, request));
    if (handled) {
      ClearRunning(e);
      return store_->PutTrial(e.row);
    }
  }
  const std::string& metric = objectives_.objectives()[0].metric();
  std::string error;
  const TrialEvaluation evaluation = EvaluateNow(e);
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
  ClearRunning(e);
  const int exit_code = request.exit_code();
  if (error.empty()) {
    e.row.state = v1::COMPLETED;
    e.row.value = evaluation.values[0];
    e.row.error.clear();
    e.row.finished_at = Now();
    const double v = evaluation.values[0];
    RecordOutcome(e);
    history_[e.row.id - 1] = ObservedAs(e, Observation::Outcome::kCompleted);
    for (const std::string& missing : evaluation.missing_constraints) {
      SEXTANT_RETURN_IF_ERROR(Event("constraint_missing", e.row.id,
                                    absl::StrCat("the trial never reported the constraint metric '",
                                                 missing, "'; it is infeasible")));
    }
    if (!objectives_.multi() && spec_.objective().has_target() && evaluation.feasible() &&
        !Better(spec_.objective().target(), v)) {
      if (!target_reached_) {
        target_reached_ = true;
        SEXTANT_RETURN_IF_ERROR(
            Event("target_reached", e.row.id, absl::StrCat(metric, "=", FormatValue(v))));
      }
    }
    if (scheduler_) {
      AddRung(e, "completed");
      scheduler_->OnEnd(e.row.id, /*reached_target=*/true);
    }
    SEXTANT_RETURN_IF_ERROR(store_->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_COMPLETED,
                                                  exit_code, "", Now()));
  } else {
    e.row.failures += 1;
    e.row.error = error;
    SEXTANT_RETURN_IF_ERROR(store_->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_FAILED,
                                                  exit_code, error, Now()));
    if (e.row.failures <= spec_.trial().max_restarts() && !interrupted_) {
      e.row.state = v1::PENDING;
      queue_.push_back(e.row.id);
      SEXTANT_RETURN_IF_ERROR(Event("trial_restarted", e.row.id, error));
    } else {
      e.row.state = v1::FAILED;
      e.row.finished_at = Now();
      history_[e.row.id - 1].outcome = Observation::Outcome::kFailed;
      if (scheduler_) scheduler_->OnEnd(e.row.id, /*reached_target=*/false);
      SEXTANT_RETURN_IF_ERROR(Event("trial_failed", e.row.id, error));
      UpdateFailureStop();
    }
  }
  return store_->PutTrial(e.row);
}

absl::StatusOr<v1::CompleteResponse> Dispatcher::Complete(const v1::CompleteRequest& request) {
  return InTransaction([&]() -> absl::StatusOr<v1::CompleteResponse> {
    SEXTANT_ASSIGN_OR_RETURN(Entry * e,
                             Current(request.trial_id(), request.attempt(), request.worker_id()));
    SEXTANT_RETURN_IF_ERROR(FinishInTx(*e, request));
    v1::CompleteResponse response;
    if (request.lease_next()) {
      SEXTANT_ASSIGN_OR_RETURN(*response.mutable_next(), LeaseInTx(request.worker_id()));
    }
    return response;
  });
}

absl::StatusOr<int> Dispatcher::Tick() {
  absl::Time now = clock_->Now();
  if (now - telemetry_flushed_ >= absl::Seconds(5)) SEXTANT_RETURN_IF_ERROR(FlushTelemetry());
  std::vector<Entry*> lapsed;
  for (int64_t id : running_ids_) {
    Entry& e = trials_[id - 1];
    if (e.lease_deadline < now) lapsed.push_back(&e);
  }
  if (lapsed.empty()) return 0;
  SEXTANT_RETURN_IF_ERROR(InTransaction([&]() -> absl::Status {
    // Oldest first at the front of the queue: requeued work runs before new trials.
    for (auto it = lapsed.rbegin(); it != lapsed.rend(); ++it) {
      Entry& e = **it;
      SEXTANT_RETURN_IF_ERROR(
          LoseInTx(e, "lease_expired",
                   absl::StrCat("lease of worker ", e.worker_id, " lapsed (no heartbeat for ",
                                options_.lease_seconds, "s)")));
    }
    return absl::OkStatus();
  }));
  return static_cast<int>(lapsed.size());
}

absl::Status Dispatcher::LoseInTx(Entry& e, const std::string& kind, const std::string& why) {
  SEXTANT_RETURN_IF_ERROR(
      store_->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_LOST, -1, why, Now()));
  SEXTANT_RETURN_IF_ERROR(Event(kind, e.row.id, why));
  e.row.state = v1::PENDING;
  ClearRunning(e);
  EndAttemptClock(e);
  queue_.push_front(e.row.id);
  return store_->PutTrial(e.row);
}

absl::StatusOr<int> Dispatcher::WorkerLost(int64_t worker_id, const std::string& why) {
  retired_.insert(worker_id);
  std::vector<Entry*> lost;
  for (int64_t id : running_ids_) {
    if (trials_[id - 1].worker_id == worker_id) lost.push_back(&trials_[id - 1]);
  }
  if (lost.empty()) return 0;
  SEXTANT_RETURN_IF_ERROR(InTransaction([&]() -> absl::Status {
    for (Entry* e : lost) {
      SEXTANT_RETURN_IF_ERROR(LoseInTx(*e, "worker_lost",
                                       absl::StrCat("worker ", worker_id, " is gone (", why,
                                                    "); requeued to resume from its "
                                                    "checkpoint")));
    }
    return absl::OkStatus();
  }));
  return static_cast<int>(lost.size());
}

void Dispatcher::SetRunning(Entry& e, int64_t worker_id) {
  e.worker_id = worker_id;
  if (running_ids_.insert(e.row.id).second) ++running_;
  if (rules_.worker_trial) rules_.worker_trial(worker_id, e.row.id);
}

int64_t Dispatcher::ClearRunning(Entry& e) {
  const int64_t worker = e.worker_id;
  if (running_ids_.erase(e.row.id) > 0) --running_;
  e.worker_id = 0;
  if (rules_.worker_trial && worker != 0) rules_.worker_trial(worker, 0);
  return worker;
}

absl::Status Dispatcher::Interrupt() {
  if (interrupted_) return absl::OkStatus();
  return InTransaction([&]() -> absl::Status {
    interrupted_ = true;
    int cancelled = 0;
    const std::vector<int64_t> running(running_ids_.begin(), running_ids_.end());
    for (int64_t id : running) {
      Entry& e = trials_[id - 1];
      SEXTANT_RETURN_IF_ERROR(store_->FinishAttempt(e.row.id, e.row.attempts, v1::ATTEMPT_CANCELLED,
                                                    -1, "run interrupted", Now()));
      e.row.state = v1::CANCELLED;
      ClearRunning(e);
      EndAttemptClock(e);
      ++cancelled;
      SEXTANT_RETURN_IF_ERROR(store_->PutTrial(e.row));
    }
    return Event("run_interrupted", 0, absl::StrCat(cancelled, " running trials cancelled"));
  });
}

absl::Status Dispatcher::BeginStop(const std::string& why) {
  if (stopping_ || interrupted_) return absl::OkStatus();
  stopping_ = true;
  stop_reason_ = why;
  return InTransaction([&]() -> absl::Status {
    return Event(
        "run_stopping", 0,
        absl::StrCat(why, "; ", running_, " running trials get the notice to checkpoint and stop"));
  });
}

absl::Status Dispatcher::MarkRunState(v1::RunState state, const std::string& why) {
  SEXTANT_RETURN_IF_ERROR(FlushTelemetry());
  return InTransaction([&]() -> absl::Status { return store_->EndRun(state, Now(), why); });
}

int Dispatcher::Demand() const {
  if (interrupted_ || stopping_ || hold_ || failure_stop_ || Finished()) return 0;
  const int slots = std::max(1, spec_.search().max_concurrent()) - running_;
  if (slots <= 0) return 0;
  const int queued = static_cast<int>(queue_.size());
  if (!scheduler_) return CanCreate() ? slots : std::min(slots, queued);
  if (scheduler_done_) return std::min(slots, queued);
  // What the scheduler would hand a free worker now (asking changes nothing): new trials fill
  // every slot; a promotion is one job more than the queue; while it waits for rungs to fill,
  // only the queue can start, and a worker launched for more would sit idle.
  switch (scheduler_->NextJob(CanCreate()).kind) {
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

bool Dispatcher::TopRung(double target) const {
  return scheduler_ != nullptr && target > 0 && target >= spec_.search().fidelity().max() - 1e-9;
}

bool Dispatcher::LowRungsOnly(int64_t worker_id) const {
  if (rules_.top_rung_barred.empty()) return false;
  auto it = workers_.find(worker_id);
  return it != workers_.end() && rules_.top_rung_barred.count(it->second.pool) > 0;
}

Dispatcher::Entry* Dispatcher::TakeQueued(bool low_rungs_only) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    Entry& e = trials_[*it - 1];
    if (low_rungs_only && TopRung(e.row.target)) continue;
    queue_.erase(it);
    return &e;
  }
  return nullptr;
}

int Dispatcher::TopRungDemand() const {
  if (rules_.top_rung_barred.empty() || interrupted_ || stopping_ || hold_) return 0;
  int n = 0;
  for (int64_t id : queue_) n += TopRung(trials_[id - 1].row.target) ? 1 : 0;
  return n;
}

std::map<int64_t, int64_t> Dispatcher::RunningByWorker() const {
  std::map<int64_t, int64_t> out;
  for (int64_t id : running_ids_) {
    const Entry& e = trials_[id - 1];
    if (e.worker_id != 0) out[e.worker_id] = e.row.id;
  }
  return out;
}

DispatchStats Dispatcher::Stats() const {
  DispatchStats s;
  s.max_trials = spec_.search().max_trials();
  s.created = static_cast<int>(trials_.size());
  std::vector<const TrialRow*> failed;
  for (const Entry& e : trials_) {
    ++s.by_state[TrialStateName(e.row.state)];
    s.preemptions += e.row.preemptions;
    if (TrialEnded(e.row.state)) ++s.finished;
    if (e.row.state == v1::FAILED) {
      ++s.failed;
      failed.push_back(&e.row);
    }
    if (!objectives_.multi() && e.row.state == v1::COMPLETED && e.row.value && e.row.feasible &&
        (!s.best_value || Better(*e.row.value, *s.best_value))) {
      s.best_value = e.row.value;
      s.best_trial = e.row.id;
    }
  }
  if (objectives_.multi()) {
    std::vector<std::vector<double>> points;
    for (const Entry& e : trials_) {
      if (e.row.state == v1::COMPLETED && e.row.feasible &&
          e.row.values.size() == static_cast<size_t>(objectives_.size())) {
        points.push_back(objectives_.Minimised(e.row.values));
      }
    }
    s.front_size = static_cast<int>(ParetoFront(points).size());
    bool derived = false;
    s.hypervolume = Hypervolume(points, ReferencePoint(objectives_, points, &derived));
  }
  const size_t shown = std::min<size_t>(failed.size(), 8);
  auto later = [](const TrialRow* a, const TrialRow* b) { return a->finished_at > b->finished_at; };
  std::partial_sort(failed.begin(), failed.begin() + shown, failed.end(), later);
  for (size_t i = shown; i-- > 0;) {
    s.recent_failures.emplace_back(failed[i]->id, failed[i]->error);
  }
  if (!CanCreate() && s.max_trials > s.created) s.max_trials = s.created;
  if (spec_.budget().has_max_cost()) s.budget = spec_.budget().max_cost();
  return s;
}

}  // namespace sextant
