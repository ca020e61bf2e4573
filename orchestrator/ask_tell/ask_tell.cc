#include "orchestrator/ask_tell/ask_tell.h"

#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/objectives.h"

namespace sextant {
namespace {

constexpr char kLeasesKey[] = "ask_tell_leases";
constexpr char kRunIdKey[] = "run_id";
// A tell's own measurement: above every step sequence, so it never collides with one.
constexpr int64_t kTellSequence = kMaxStepSequence;

// The objectives a client reports (not the built-ins cost and trial_seconds), in order.
std::vector<std::string> ClientObjectives(const v1::ExperimentSpec& spec) {
  std::vector<std::string> out;
  const ObjectiveSet objectives(spec);
  for (const v1::Objective& o : objectives.objectives()) {
    if (o.metric() != kCostMetric && o.metric() != kTrialSecondsMetric) out.push_back(o.metric());
  }
  return out;
}

absl::Status CheckMetrics(const google::protobuf::Map<std::string, double>& metrics,
                          int64_t trial_id, bool finite) {
  if (metrics.size() > static_cast<size_t>(kMaxTellMetrics)) {
    return absl::InvalidArgumentError(absl::StrCat("trial ", trial_id, ": ", metrics.size(),
                                                   " metrics; at most ", kMaxTellMetrics));
  }
  for (const auto& [name, value] : metrics) {
    if (name.empty() || name.size() > kMaxMetricNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trial ", trial_id, ": a metric name must have 1 to ", kMaxMetricNameBytes, " bytes"));
    }
    if (finite && !std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat("trial ", trial_id, ": metric ", name, " is ",
                                                     value, "; tell finite numbers (or FAILED)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

double AskTellLeaseSeconds(const v1::ExperimentSpec& spec) {
  return spec.search().lease_seconds() > 0 ? spec.search().lease_seconds()
                                           : kDefaultAskTellLeaseSeconds;
}

absl::StatusOr<std::map<int64_t, HeldLease>> LoadHeldLeases(Store& store) {
  std::map<int64_t, HeldLease> out;
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> text, store.GetMeta(kLeasesKey));
  if (!text) return out;
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) return absl::DataLossError("store: the ask/tell lease record is corrupt");
  for (auto it = j.begin(); it != j.end(); ++it) {
    int64_t id = std::strtoll(it.key().c_str(), nullptr, 10);
    const nlohmann::json& l = it.value();
    if (id < 1 || !l.is_object()) continue;
    HeldLease h;
    h.attempt = l.value("attempt", 0);
    h.worker_id = l.value("worker", int64_t{0});
    h.deadline = absl::FromUnixMicros(static_cast<int64_t>(l.value("deadline", 0.0) * 1e6));
    h.started = l.value("started", 0.0);
    out[id] = h;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<AskTell>> AskTell::Create(Dispatcher* dispatcher, Store* store,
                                                         Clock* clock, Random random) {
  std::unique_ptr<AskTell> a(new AskTell(dispatcher, store, clock));
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> id, store->GetMeta(kRunIdKey));
  if (id && !id->empty()) {
    a->run_id_ = *id;
  } else {
    uint8_t bytes[8];
    if (random) {
      random(bytes, sizeof(bytes));
    } else {
      if (sodium_init() < 0) return absl::InternalError("libsodium failed to initialise");
      randombytes_buf(bytes, sizeof(bytes));
    }
    a->run_id_ = absl::StrCat(dispatcher->spec().name(), "-",
                              absl::BytesToHexString(absl::string_view(
                                  reinterpret_cast<const char*>(bytes), sizeof(bytes))));
    SEXTANT_RETURN_IF_ERROR(store->PutMeta(kRunIdKey, a->run_id_));
  }
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> text, store->GetMeta(kLeasesKey));
  nlohmann::json j = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json::object();
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const nlohmann::json& l = it.value();
      if (!l.is_object()) continue;
      Lease lease;
      lease.attempt = l.value("attempt", 0);
      lease.worker_id = l.value("worker", int64_t{0});
      lease.deadline = absl::FromUnixMicros(static_cast<int64_t>(l.value("deadline", 0.0) * 1e6));
      lease.started = l.value("started", 0.0);
      lease.identity = l.value("identity", "");
      lease.sequence = l.value("sequence", int64_t{0});
      a->leases_[std::strtoll(it.key().c_str(), nullptr, 10)] = lease;
    }
  }
  a->saved_leases_ = text.value_or("");
  a->ForgetEnded();
  return a;
}

double AskTell::Now() const { return absl::ToDoubleSeconds(clock_->Now() - absl::UnixEpoch()); }

template <typename F>
auto AskTell::Transaction(F&& f) -> decltype(f()) {
  SEXTANT_RETURN_IF_ERROR(store_->Begin());
  auto result = f();
  const absl::Status saved = result.ok() ? SaveLeasesInTx() : absl::OkStatus();
  if (!result.ok() || !saved.ok()) {
    store_->Rollback();
    saved_leases_.clear();  // the record is as before: write it next time
    if (!saved.ok()) return saved;
    return result;
  }
  SEXTANT_RETURN_IF_ERROR(store_->Commit());
  return result;
}

void AskTell::ForgetEnded() {
  for (auto it = leases_.begin(); it != leases_.end();) {
    const TrialRow* row = dispatcher_->trials().row(it->first);
    const bool runs =
        row != nullptr && row->state == v1::RUNNING && row->attempts == it->second.attempt;
    it = runs ? std::next(it) : leases_.erase(it);
  }
}

absl::Status AskTell::SaveLeasesInTx() {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [id, l] : leases_) {
    j[absl::StrCat(id)] = {{"attempt", l.attempt},
                           {"worker", l.worker_id},
                           {"deadline", absl::ToUnixMicros(l.deadline) / 1e6},
                           {"started", l.started},
                           {"identity", l.identity},
                           {"sequence", l.sequence}};
  }
  std::string text = j.dump();
  if (text == saved_leases_) return absl::OkStatus();
  SEXTANT_RETURN_IF_ERROR(store_->PutMeta(kLeasesKey, text));
  saved_leases_ = std::move(text);
  return absl::OkStatus();
}

absl::Status AskTell::CheckRunId(const std::string& run_id) const {
  if (run_id == run_id_) return absl::OkStatus();
  return absl::InvalidArgumentError(run_id.empty()
                                        ? absl::StrCat("run_id is missing; this run is ", run_id_)
                                        : absl::StrCat("run_id ", run_id.substr(0, 128),
                                                       " is another run's; this run is ", run_id_));
}

absl::StatusOr<int64_t> AskTell::WorkerFor(const std::string& identity) {
  auto it = workers_.find(identity);
  if (it != workers_.end()) return it->second;
  v1::RegisterRequest r;
  r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  r.set_region("ask_tell");
  r.set_pool("ask_tell");
  r.set_hostname(identity.empty() ? "asker" : identity);
  r.set_pid(getpid());
  SEXTANT_ASSIGN_OR_RETURN(v1::RegisterResponse registered, dispatcher_->Register(r));
  workers_[identity] = registered.worker_id();
  return registered.worker_id();
}

std::string AskTell::WaitingFor() const {
  // While new trials may come, the wait is an ordinary one for a free slot.
  if (dispatcher_->MayCreate() || leases_.empty()) return "";
  std::vector<std::pair<absl::Time, int64_t>> held;
  for (const auto& [trial, lease] : leases_) held.emplace_back(lease.deadline, trial);
  std::sort(held.begin(), held.end());
  std::vector<std::string> named;
  for (size_t i = 0; i < held.size() && i < 3; ++i) {
    const double minutes = absl::ToDoubleMinutes(held[i].first - clock_->Now());
    named.push_back(absl::StrCat("trial ", held[i].second, " (its lease ends in ",
                                 minutes >= 1
                                     ? absl::StrFormat("%.0f min", minutes)
                                     : absl::StrFormat("%.0f s", std::max(0.0, minutes * 60)),
                                 ")"));
  }
  if (held.size() > 3) named.push_back(absl::StrCat(held.size() - 3, " more"));
  return absl::StrCat(
      "no trial can start until an asked trial is told or its lease lapses: "
      "waiting for ",
      absl::StrJoin(named, ", "), ", asked and not told. The run has all its ",
      dispatcher_->trials().size(),
      " trials (search.max_trials); tell those, or give it room with `sextant "
      "resume RUN_DIR --max-trials N`");
}

absl::StatusOr<v1::AskResponse> AskTell::Ask(const v1::AskRequest& request,
                                             const std::string& identity) {
  if (request.count() < 0 || request.count() > kMaxAskCount) {
    return absl::InvalidArgumentError(
        absl::StrCat("ask count ", request.count(), " is out of bounds (1 to ", kMaxAskCount, ")"));
  }
  ForgetEnded();
  // Nothing can start (every slot is asked): answer without a transaction, as a long-poll asks
  // again and again.
  if (dispatcher_->Demand() == 0 && !dispatcher_->Finished()) {
    v1::AskResponse none;
    none.set_waiting(WaitingFor());
    return none;
  }
  const int count = std::max(1, request.count());
  return Transaction([&]() -> absl::StatusOr<v1::AskResponse> {
    v1::AskResponse response;
    SEXTANT_ASSIGN_OR_RETURN(int64_t worker, WorkerFor(identity));
    const std::string& fidelity = dispatcher_->spec().search().fidelity().name();
    const bool scheduled =
        dispatcher_->spec().search().scheduler() != v1::Search::NONE &&
        dispatcher_->spec().search().scheduler() != v1::Search::SCHEDULER_UNSPECIFIED;
    while (response.trials_size() < count) {
      SEXTANT_ASSIGN_OR_RETURN(v1::LeaseResponse lease, dispatcher_->Lease(worker));
      if (lease.done()) {
        response.set_done(response.trials_size() == 0);
        break;
      }
      if (!lease.has_assignment()) break;
      const v1::Assignment& a = lease.assignment();
      v1::AskedTrial* t = response.add_trials();
      t->set_trial_id(a.trial_id());
      t->set_attempt(a.attempt());
      *t->mutable_params() = a.params();
      t->set_checkpoint_dir(a.checkpoint_dir());
      t->set_fidelity_target(a.fidelity_target());
      t->set_resume(a.resume());
      t->set_lease_seconds(dispatcher_->lease_seconds());
      t->set_run_id(run_id_);
      if (scheduled) t->set_fidelity_key(fidelity);
      Lease& l = leases_[a.trial_id()];
      l = Lease{a.attempt(), worker,   clock_->Now() + absl::Seconds(dispatcher_->lease_seconds()),
                Now(),       identity, 0};
    }
    return response;
  });
}

absl::StatusOr<std::pair<int64_t, AskTell::Lease*>> AskTell::Held(const std::string& run_id,
                                                                  int64_t trial_id, int attempt,
                                                                  const std::string& identity) {
  SEXTANT_RETURN_IF_ERROR(CheckRunId(run_id));
  const TrialRow* row = dispatcher_->trials().row(trial_id);
  if (row == nullptr) {
    return absl::NotFoundError(absl::StrCat("trial ", trial_id, " is not in this run (it has ",
                                            dispatcher_->trials().size(), " trials)"));
  }
  if (attempt < 0 || attempt > row->attempts) {
    return absl::NotFoundError(absl::StrCat("trial ", trial_id, " has no attempt ", attempt,
                                            " (it has had ", row->attempts, ")"));
  }
  if (attempt == 0) attempt = row->attempts;
  ForgetEnded();
  auto it = leases_.find(trial_id);
  if (it == leases_.end() || it->second.attempt != attempt) {
    std::string now;
    if (TrialEnded(row->state)) {
      now = absl::StrCat("the trial ended ", TrialStateName(row->state), " in attempt ",
                         row->attempts);
    } else if (row->state == v1::RUNNING) {
      now = absl::StrCat("the trial runs as attempt ", row->attempts);
    } else {
      SEXTANT_ASSIGN_OR_RETURN(std::optional<AttemptRow> ended,
                               store_->LoadAttempt(trial_id, attempt));
      if (ended.has_value() && ended->outcome == v1::ATTEMPT_CANCELLED) {
        now =
            "the run was interrupted while it ran, which cancelled it; the trial is asked "
            "again once the run resumes";
      } else {
        now = absl::StrCat("its lease lapsed (no tell, report or touch for ",
                           dispatcher_->lease_seconds(), "s) and the trial was requeued");
      }
    }
    return absl::AbortedError(absl::StrCat("trial ", trial_id, " attempt ", attempt,
                                           " no longer holds its lease: ", now, "; ask again"));
  }
  if (it->second.identity != identity) {
    return absl::PermissionDeniedError(absl::StrCat(
        "trial ", trial_id, " was asked by ",
        it->second.identity.empty() ? "a caller without a certificate" : it->second.identity,
        ", not by ", identity.empty() ? "a caller without a certificate" : identity));
  }
  return std::make_pair(trial_id, &it->second);
}

absl::StatusOr<v1::ReportStepResponse> AskTell::ReportStep(const v1::ReportStepRequest& request,
                                                           const std::string& identity) {
  SEXTANT_ASSIGN_OR_RETURN(auto held,
                           Held(request.run_id(), request.trial_id(), request.attempt(), identity));
  Lease& lease = *held.second;
  SEXTANT_RETURN_IF_ERROR(CheckMetrics(request.metrics(), request.trial_id(), /*finite=*/false));
  if (request.sequence() < 0 || request.sequence() >= kMaxStepSequence) {
    return absl::InvalidArgumentError(absl::StrCat("trial ", request.trial_id(), ": sequence ",
                                                   request.sequence(), " is out of bounds"));
  }
  const std::string& key = dispatcher_->spec().search().fidelity().name();
  if (auto f = request.metrics().find(key);
      !key.empty() && f != request.metrics().end() && !std::isfinite(f->second)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trial ", request.trial_id(), ": the fidelity ", key, " is ", f->second));
  }
  const int64_t sequence = request.sequence() > 0 ? request.sequence() : lease.sequence + 1;
  v1::ReportRequest report;
  report.set_worker_id(lease.worker_id);
  v1::Measurement* m = report.add_measurements();
  m->set_trial_id(request.trial_id());
  m->set_attempt(lease.attempt);
  m->set_sequence(sequence);
  *m->mutable_metrics() = request.metrics();
  m->set_elapsed_seconds(std::max(0.0, Now() - lease.started));
  const Lease before = lease;
  absl::StatusOr<v1::ReportStepResponse> result =
      Transaction([&]() -> absl::StatusOr<v1::ReportStepResponse> {
        SEXTANT_ASSIGN_OR_RETURN(v1::TrialAction action, dispatcher_->Report(report));
        lease.sequence = std::max(lease.sequence, sequence);
        lease.deadline = clock_->Now() + absl::Seconds(dispatcher_->lease_seconds());
        v1::ReportStepResponse response;
        response.set_action(action);
        return response;
      });
  if (!result.ok()) lease = before;
  return result;
}

absl::StatusOr<v1::TouchResponse> AskTell::Touch(const v1::TouchRequest& request,
                                                 const std::string& identity) {
  SEXTANT_ASSIGN_OR_RETURN(auto held,
                           Held(request.run_id(), request.trial_id(), request.attempt(), identity));
  Lease& lease = *held.second;
  const Lease before = lease;
  v1::HeartbeatRequest heartbeat;
  heartbeat.set_worker_id(lease.worker_id);
  heartbeat.set_trial_id(request.trial_id());
  heartbeat.set_attempt(lease.attempt);
  absl::StatusOr<v1::TouchResponse> result =
      Transaction([&]() -> absl::StatusOr<v1::TouchResponse> {
        SEXTANT_ASSIGN_OR_RETURN(v1::TrialAction action, dispatcher_->Heartbeat(heartbeat));
        lease.deadline = clock_->Now() + absl::Seconds(dispatcher_->lease_seconds());
        v1::TouchResponse response;
        response.set_action(action);
        response.set_lease_seconds(dispatcher_->lease_seconds());
        return response;
      });
  if (!result.ok()) lease = before;
  return result;
}

v1::TellResponse AskTell::Result(int64_t trial_id, int attempt) const {
  v1::TellResponse response;
  const TrialRow& row = *dispatcher_->trials().row(trial_id);
  response.set_state(row.state);
  response.set_attempt(attempt);
  const ObjectiveSet objectives(dispatcher_->spec());
  if (objectives.multi()) {
    for (size_t i = 0; i < row.values.size() && i < objectives.objectives().size(); ++i) {
      (*response.mutable_metrics())[objectives.objectives()[i].metric()] = row.values[i];
    }
  } else if (row.value) {
    (*response.mutable_metrics())[objectives.objectives()[0].metric()] = *row.value;
  }
  return response;
}

// Long because a tell is checked in full (repeat, lease, identity, payload) before anything
// is stored.
absl::StatusOr<v1::TellResponse> AskTell::Tell(const v1::TellRequest& request,
                                               const std::string& identity) {
  SEXTANT_RETURN_IF_ERROR(CheckRunId(request.run_id()));
  const int64_t id = request.trial_id();
  const TrialRow* row = dispatcher_->trials().row(id);
  if (row != nullptr) {
    // A repeat: the attempt that ended the trial (or paused it at a rung) is told again.
    const int attempt = request.attempt() == 0 ? row->attempts : request.attempt();
    ForgetEnded();
    const bool held = leases_.count(id) && leases_.at(id).attempt == attempt;
    if (!held && attempt == row->attempts && attempt > 0 &&
        (TrialEnded(row->state) || row->paused)) {
      v1::TellResponse response = Result(id, attempt);
      response.set_already_told(true);
      return response;
    }
    // A repeated FAILED tell, the trial since requeued for another attempt (or ended by a
    // later one): the attempt's own outcome, as stored.
    if (!held && attempt > 0 && attempt <= row->attempts) {
      SEXTANT_ASSIGN_OR_RETURN(std::optional<AttemptRow> ended, store_->LoadAttempt(id, attempt));
      if (ended.has_value() && ended->outcome == v1::ATTEMPT_FAILED) {
        v1::TellResponse response;
        response.set_state(v1::FAILED);
        response.set_attempt(attempt);
        response.set_already_told(true);
        return response;
      }
    }
  }
  SEXTANT_ASSIGN_OR_RETURN(auto found, Held(request.run_id(), id, request.attempt(), identity));
  Lease& lease = *found.second;
  const v1::TellRequest::Outcome outcome = request.outcome() == v1::TellRequest::OUTCOME_UNSPECIFIED
                                               ? v1::TellRequest::COMPLETED
                                               : request.outcome();
  SEXTANT_RETURN_IF_ERROR(CheckMetrics(request.metrics(), id, /*finite=*/true));
  google::protobuf::Map<std::string, double> metrics = request.metrics();
  const std::vector<std::string> names = ClientObjectives(dispatcher_->spec());
  if (request.values_size() > 0) {
    if (request.values_size() != static_cast<int>(names.size())) {
      return absl::InvalidArgumentError(absl::StrCat("trial ", id, ": ", request.values_size(),
                                                     " values told, but the experiment has ",
                                                     names.size(), " objectives to tell"));
    }
    for (int i = 0; i < request.values_size(); ++i) {
      if (!std::isfinite(request.values(i))) {
        return absl::InvalidArgumentError(
            absl::StrCat("trial ", id, ": the value of objective '", names[i], "' is ",
                         request.values(i), "; tell a finite number, or --state failed"));
      }
      metrics[names[i]] = request.values(i);
    }
  }
  if (outcome == v1::TellRequest::COMPLETED) {
    for (const std::string& name : names) {
      if (!metrics.contains(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("trial ", id, ": a completed tell needs the objective ", name,
                         " (values, or metrics with ", name, ")"));
      }
    }
  }
  v1::CompleteRequest complete;
  complete.set_worker_id(lease.worker_id);
  complete.set_trial_id(id);
  complete.set_attempt(lease.attempt);
  if (!metrics.empty()) {
    v1::Measurement* m = complete.add_measurements();
    m->set_trial_id(id);
    m->set_attempt(lease.attempt);
    m->set_sequence(kTellSequence);
    *m->mutable_metrics() = metrics;
    m->set_elapsed_seconds(std::max(0.0, Now() - lease.started));
  }
  if (outcome == v1::TellRequest::FAILED) {
    complete.set_exit_code(1);
    std::string error = request.error().substr(0, kMaxTellErrorBytes);
    complete.set_error(error.empty() ? "told FAILED by its client" : error);
  }
  complete.set_pruned(outcome == v1::TellRequest::PRUNED);
  const int attempt = lease.attempt;
  const Lease before = lease;
  absl::StatusOr<v1::TellResponse> result = Transaction([&]() -> absl::StatusOr<v1::TellResponse> {
    SEXTANT_RETURN_IF_ERROR(dispatcher_->Complete(complete).status());
    leases_.erase(id);
    return Result(id, attempt);
  });
  if (!result.ok() && !leases_.count(id)) leases_[id] = before;
  return result;
}

}  // namespace sextant
