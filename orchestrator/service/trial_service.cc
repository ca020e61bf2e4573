#include "orchestrator/service/trial_service.h"

#include <algorithm>
#include <optional>

#include "rpc/server_security.h"
#include "rpc/status_conversion.h"

namespace sextant {
namespace {

std::string IdentityKey(const grpc::ServerContextBase& context) {
  std::optional<PeerIdentity> id = CallerIdentity(context);
  return id ? IdentityUri(*id) : "";
}

}  // namespace

void TrialServiceImpl::NoteErrorLocked(const absl::Status& status) {
  if (!IsCallersBusiness(status) && fatal_.ok()) fatal_ = status;
}

absl::Status TrialServiceImpl::fatal_error() {
  RunCore::Held held = run_->Hold();
  return fatal_;
}

template <typename Response, typename F>
grpc::ServerUnaryReactor* TrialServiceImpl::Serve(grpc::CallbackServerContext* context,
                                                  Response* response, bool serve_waiting, F&& f) {
  const std::string identity = IdentityKey(*context);
  absl::Status status;
  {
    RunCore::Held held = run_->Hold();
    auto result = f(identity);
    NoteErrorLocked(result.status());
    if (result.ok()) *response = *std::move(result);
    // A told trial frees a slot, or ends the run, for a waiting asker.
    if (serve_waiting) ServeWaitingLocked();
    status = result.status();
  }
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* TrialServiceImpl::Ask(grpc::CallbackServerContext* context,
                                                const v1::AskRequest* request,
                                                v1::AskResponse* response) {
  const std::string identity = IdentityKey(*context);
  auto* reactor = context->DefaultReactor();
  [&] {
    RunCore::Held held = run_->Hold();
    if (draining_) {
      response->set_done(true);
      reactor->Finish(grpc::Status::OK);
      return;
    }
    auto result = core_->Ask(*request, identity);
    NoteErrorLocked(result.status());
    // An ask that only a tell can answer is answered at once with why (waiting), not held.
    if (result.ok() && result->trials_size() == 0 && !result->done() && result->waiting().empty() &&
        request->wait_seconds() > 0) {
      absl::StatusOr<CallQuota::Ticket> ticket = quota_.Admit(CallerIdentity(*context));
      if (!ticket.ok()) {
        reactor->Finish(ToGrpcStatus(ticket.status()));
        return;
      }
      const double wait = std::min(request->wait_seconds(), kMaxAskWaitSeconds);
      waiting_.push_back(Waiting{context, reactor, *request, identity, response,
                                 clock_->Now() + absl::Seconds(wait), *std::move(ticket)});
      return;
    }
    if (result.ok()) *response = *std::move(result);
    reactor->Finish(ToGrpcStatus(result.status()));
  }();
  return reactor;
}

grpc::ServerUnaryReactor* TrialServiceImpl::ReportStep(grpc::CallbackServerContext* context,
                                                       const v1::ReportStepRequest* request,
                                                       v1::ReportStepResponse* response) {
  return Serve(context, response, /*serve_waiting=*/false,
               [&](const std::string& identity) { return core_->ReportStep(*request, identity); });
}

grpc::ServerUnaryReactor* TrialServiceImpl::Touch(grpc::CallbackServerContext* context,
                                                  const v1::TouchRequest* request,
                                                  v1::TouchResponse* response) {
  return Serve(context, response, /*serve_waiting=*/false,
               [&](const std::string& identity) { return core_->Touch(*request, identity); });
}

grpc::ServerUnaryReactor* TrialServiceImpl::Tell(grpc::CallbackServerContext* context,
                                                 const v1::TellRequest* request,
                                                 v1::TellResponse* response) {
  return Serve(context, response, /*serve_waiting=*/true,
               [&](const std::string& identity) { return core_->Tell(*request, identity); });
}

void TrialServiceImpl::ServeWaitingLocked() {
  const absl::Time now = clock_->Now();
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->context->IsCancelled()) {
      it->reactor->Finish(grpc::Status::CANCELLED);
      it = waiting_.erase(it);
      continue;
    }
    auto result = core_->Ask(it->request, it->identity);
    NoteErrorLocked(result.status());
    if (!result.ok() || result->trials_size() > 0 || result->done() || !result->waiting().empty() ||
        now >= it->deadline) {
      if (result.ok()) *it->response = *std::move(result);
      it->reactor->Finish(ToGrpcStatus(result.status()));
      it = waiting_.erase(it);
    } else {
      ++it;
    }
  }
}

void TrialServiceImpl::Tick() {
  RunCore::Held held = run_->Hold();
  ServeWaitingLocked();
}

void TrialServiceImpl::Drain() {
  bool linger = false;
  {
    RunCore::Held held = run_->Hold();
    linger = !draining_ && held.dispatcher().Finished();
    draining_ = true;
    for (Waiting& w : waiting_) {
      w.response->set_done(true);
      w.reactor->Finish(grpc::Status::OK);
    }
    waiting_.clear();
  }
  // Clients that are between their last tell and their next ask would otherwise find the port
  // closed (UNAVAILABLE) instead of hearing that the search is done.
  if (linger) {
    clock_->SleepFor(absl::Seconds(kFinishedGraceSeconds));
  }
}

}  // namespace sextant
