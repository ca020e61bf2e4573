#ifndef SEXTANT_ORCHESTRATOR_SERVICE_ADMIN_SERVICE_H_
#define SEXTANT_ORCHESTRATOR_SERVICE_ADMIN_SERVICE_H_

#include <atomic>

#include "grpcpp/grpcpp.h"
#include "orchestrator/core/run_core.h"
#include "sextant/v1/admin_service.grpc.pb.h"

namespace sextant {

// The admin service's check of its caller, apart from the transport: OK when require_admin is
// false or auth carries the admin role (RoleOf); PERMISSION_DENIED otherwise (auth may be null).
grpc::Status CheckAdminCaller(const grpc::AuthContext* auth, bool require_admin);

// The operator's gRPC service over a running orchestrator: status counts and drain. When
// require_admin is true (token auth is on), a call whose auth context carries no admin role is
// refused with PERMISSION_DENIED, whatever the transport let through. Thread-safe.
class AdminServiceImpl final : public v1::AdminService::CallbackService {
 public:
  // core (not owned) must outlive this.
  AdminServiceImpl(RunCore* core, bool require_admin)
      : core_(core), require_admin_(require_admin) {}

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::GetStatusRequest* request,
                                      v1::GetStatusResponse* response) override;
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* context,
                                  const v1::DrainRequest* request,
                                  v1::DrainResponse* response) override;

  // True once Drain was called: the run should stop as on SIGINT.
  bool drain_requested() const { return drain_.load(); }

 private:
  // OK, or PERMISSION_DENIED when an admin role is required and the caller lacks it.
  grpc::Status Check(grpc::CallbackServerContext* context) const;

  RunCore* const core_;
  const bool require_admin_;
  std::atomic<bool> drain_{false};
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SERVICE_ADMIN_SERVICE_H_
