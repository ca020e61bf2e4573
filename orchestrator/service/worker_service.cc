#include "orchestrator/service/worker_service.h"

#include <algorithm>
#include <optional>

#include "common/ids.h"
#include "common/status_macros.h"
#include "rpc/server_security.h"

namespace sextant {
namespace {

// The caller's certificate identity as a string ("" without one).
std::string IdentityKey(const grpc::ServerContextBase& context) {
  std::optional<PeerIdentity> id = CallerIdentity(context);
  return id ? IdentityUri(*id) : "";
}

}  // namespace

absl::Status WorkerServiceImpl::CheckSessionLocked(grpc::CallbackServerContext* context,
                                                   int64_t worker_id) {
  absl::string_view session;
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find(kSessionMetadataKey); it != metadata.end()) {
    session = absl::string_view(it->second.data(), it->second.size());
  }
  return sessions_.Check(worker_id, session, IdentityKey(*context));
}

void WorkerServiceImpl::NoteErrorLocked(const absl::Status& status) {
  if (!IsCallersBusiness(status) && fatal_.ok()) fatal_ = status;
}

absl::Status WorkerServiceImpl::fatal_error() {
  absl::MutexLock lock(&mu_);
  return fatal_;
}

template <typename F>
grpc::ServerUnaryReactor* WorkerServiceImpl::Serve(grpc::CallbackServerContext* context,
                                                   bool serve_waiting, F&& f) {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = f();
    NoteErrorLocked(status);
    // A finished trial may end the run or free a concurrency slot for a waiting worker.
    if (serve_waiting) ServeWaitingLocked();
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

namespace {

template <typename Response>
void SetAction(v1::TrialAction action, Response* response) {
  response->set_action(action);
  response->set_stop(action != v1::ACTION_CONTINUE);
}

}  // namespace

grpc::ServerUnaryReactor* WorkerServiceImpl::Register(grpc::CallbackServerContext* context,
                                                      const v1::RegisterRequest* request,
                                                      v1::RegisterResponse* response) {
  return Serve(context, /*serve_waiting=*/false, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::string identity = IdentityKey(*context);
    if (absl::Status s = sessions_.CanOpen(identity); !s.ok()) return s;
    // A worker's region is its certificate's, never only what it says.
    v1::RegisterRequest checked = *request;
    const std::optional<PeerIdentity> caller = CallerIdentity(*context);
    if (caller && !caller->region.empty()) {
      if (!checked.region().empty() && checked.region() != caller->region) {
        return absl::PermissionDeniedError(
            absl::StrCat("this worker's certificate is of region ", caller->region,
                         "; it registers only there, not in ", QuotedId(checked.region())));
      }
      checked.set_region(caller->region);
    }
    auto result = core_->Register(checked);
    if (!result.ok()) return result.status();
    *response = *std::move(result);
    context->AddInitialMetadata(kSessionMetadataKey,
                                sessions_.Open(response->worker_id(), identity));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Lease(grpc::CallbackServerContext* context,
                                                   const v1::LeaseRequest* request,
                                                   v1::LeaseResponse* response) {
  absl::MutexLock lock(&mu_);
  auto* reactor = context->DefaultReactor();
  if (absl::Status s = CheckSessionLocked(context, request->worker_id()); !s.ok()) {
    reactor->Finish(ToGrpcStatus(s));
    return reactor;
  }
  if (draining_) {
    response->set_done(true);
    told_done_.insert(request->worker_id());
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  auto result = core_->Lease(request->worker_id());
  NoteErrorLocked(result.status());
  if (result.ok() && result->has_retry() && request->wait_seconds() > 0) {
    absl::StatusOr<CallQuota::Ticket> ticket = quota_.Admit(CallerIdentity(*context));
    if (!ticket.ok()) {
      reactor->Finish(ToGrpcStatus(ticket.status()));
      return reactor;
    }
    double wait = std::min(request->wait_seconds(), 30.0);
    waiting_.push_back(Waiting{context, reactor, request->worker_id(), response,
                               clock_->Now() + absl::Seconds(wait), *std::move(ticket)});
    return reactor;
  }
  if (result.ok()) *response = *std::move(result);
  if (response->done()) told_done_.insert(request->worker_id());
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Heartbeat(grpc::CallbackServerContext* context,
                                                       const v1::HeartbeatRequest* request,
                                                       v1::HeartbeatResponse* response) {
  return Serve(context, /*serve_waiting=*/false, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    SEXTANT_RETURN_IF_ERROR(CheckSessionLocked(context, request->worker_id()));
    auto result = core_->Heartbeat(*request);
    if (result.ok()) SetAction(*result, response);
    return result.status();
  });
}

void WorkerServiceImpl::Redact(google::protobuf::RepeatedPtrField<v1::Measurement>* ms) const {
  for (v1::Measurement& m : *ms) {
    if (!m.event().empty()) m.set_event(redactor_.Apply(m.event()));
  }
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Report(grpc::CallbackServerContext* context,
                                                    const v1::ReportRequest* request,
                                                    v1::ReportResponse* response) {
  v1::ReportRequest redacted;
  if (!redactor_.empty()) {
    redacted = *request;
    Redact(redacted.mutable_measurements());
    request = &redacted;
  }
  return Serve(context, /*serve_waiting=*/false, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    SEXTANT_RETURN_IF_ERROR(CheckSessionLocked(context, request->worker_id()));
    auto result = core_->Report(*request);
    if (result.ok()) SetAction(*result, response);
    return result.status();
  });
}

grpc::ServerUnaryReactor* WorkerServiceImpl::Complete(grpc::CallbackServerContext* context,
                                                      const v1::CompleteRequest* request,
                                                      v1::CompleteResponse* response) {
  v1::CompleteRequest redacted;
  if (!redactor_.empty()) {
    redacted = *request;
    redacted.set_error(redactor_.Apply(redacted.error()));
    Redact(redacted.mutable_measurements());
    request = &redacted;
  }
  return Serve(context, /*serve_waiting=*/true, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    SEXTANT_RETURN_IF_ERROR(CheckSessionLocked(context, request->worker_id()));
    auto result = core_->Complete(*request);
    if (result.ok()) *response = *std::move(result);
    if (response->next().done()) told_done_.insert(request->worker_id());
    return result.status();
  });
}

void WorkerServiceImpl::ServeWaitingLocked() {
  absl::Time now = clock_->Now();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->context->IsCancelled()) {
      it->reactor->Finish(grpc::Status::CANCELLED);
      it = waiting_.erase(it);
      continue;
    }
    auto result = core_->Lease(it->worker_id);
    NoteErrorLocked(result.status());
    if (!result.ok() || !result->has_retry() || now >= it->deadline) {
      if (result.ok()) *it->response = *std::move(result);
      if (it->response->done()) told_done_.insert(it->worker_id);
      it->reactor->Finish(ToGrpcStatus(result.status()));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
}

void WorkerServiceImpl::Drain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  for (Waiting& w : waiting_) {
    w.response->set_done(true);
    told_done_.insert(w.worker_id);
    w.reactor->Finish(grpc::Status::OK);
  }
  waiting_.clear();
}

bool WorkerServiceImpl::AllToldDone() {
  absl::MutexLock lock(&mu_);
  for (int64_t id : core_->WorkerIds()) {
    if (!told_done_.count(id)) return false;
  }
  return true;
}

void WorkerServiceImpl::ServeWaiting() {
  absl::MutexLock lock(&mu_);
  ServeWaitingLocked();
}

}  // namespace sextant
