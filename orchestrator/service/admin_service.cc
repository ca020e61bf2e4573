#include "orchestrator/service/admin_service.h"

#include "rpc/server_security.h"

namespace sextant {

grpc::Status CheckAdminCaller(const grpc::AuthContext* auth, bool require_admin) {
  if (!require_admin) return grpc::Status::OK;
  if (auth != nullptr && RoleOf(*auth) == Role::kAdmin) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "admin calls need the admin token");
}

grpc::Status AdminServiceImpl::Check(grpc::CallbackServerContext* context) const {
  return CheckAdminCaller(context->auth_context().get(), require_admin_);
}

grpc::ServerUnaryReactor* AdminServiceImpl::GetStatus(grpc::CallbackServerContext* context,
                                                      const v1::GetStatusRequest*,
                                                      v1::GetStatusResponse* response) {
  auto* reactor = context->DefaultReactor();
  grpc::Status status = Check(context);
  if (status.ok()) {
    const DispatchStats stats = core_->Stats();
    response->set_experiment(core_->spec().name());
    response->set_max_trials(stats.max_trials);
    for (const auto& [state, n] : stats.by_state) (*response->mutable_trials_by_state())[state] = n;
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
