#include "orchestrator/admin_service.h"

#include "orchestrator/security/server_security.h"

namespace sextant {

grpc::Status AdminServiceImpl::Check(grpc::CallbackServerContext* context) const {
  if (!require_admin_) return grpc::Status::OK;
  auto auth = context->auth_context();
  if (auth && RoleOf(*auth) == Role::kAdmin) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "admin calls need the admin token");
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetStatus(grpc::CallbackServerContext* context,
                                                      const v1::GetStatusRequest*,
                                                      v1::GetStatusResponse* response) {
  auto* reactor = context->DefaultReactor();
  grpc::Status status = Check(context);
  if (status.ok()) {
    workers_->WithDispatcher([&](Dispatcher& d) {
      DispatchStats stats = d.Stats();
      response->set_experiment(d.spec().name());
      response->set_max_trials(stats.max_trials);
      for (const auto& [state, n] : stats.by_state) (*response->mutable_trials_by_state())[state] = n;
      return 0;
    });
    response->set_draining(drain_.load());
  }
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* AdminServiceImpl::Drain(grpc::CallbackServerContext* context,
                                                  const v1::DrainRequest*, v1::DrainResponse*) {
  auto* reactor = context->DefaultReactor();
  grpc::Status status = Check(context);
  if (status.ok()) drain_.store(true);
  reactor->Finish(status);
  return reactor;
}

}  // namespace sextant
