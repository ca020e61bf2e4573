#ifndef SEXTANT_ORCHESTRATOR_SERVICE_WORKER_SERVICE_H_
#define SEXTANT_ORCHESTRATOR_SERVICE_WORKER_SERVICE_H_

#include <deque>
#include <set>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/redactor.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/core/run_core.h"
#include "orchestrator/service/worker_sessions.h"
#include "rpc/call_quota.h"
#include "rpc/status_conversion.h"
#include "sextant/v1/worker_service.grpc.pb.h"

namespace sextant {

// The gRPC adapter over a RunCore's worker protocol: each RPC converts, calls the core and
// converts back. Register opens a session (WorkerSessions) for the caller's identity; every
// other call must carry that session for its worker id, or it is refused before the dispatcher
// sees it (NOT_FOUND for a worker id never registered, PERMISSION_DENIED for another's). A Lease
// that finds no work waits (long-poll) until work appears, the run ends, or its wait runs out;
// each waiting Lease takes a place in a CallQuota first (RESOURCE_EXHAUSTED beyond it), as the
// federation service's calls do. Thread-safe.
class WorkerServiceImpl final : public v1::WorkerService::CallbackService {
 public:
  // redactor masks secrets in trial errors and events before they are stored; default: none.
  // clock (not owned) times the long-polls and must outlive this; default: the real clock.
  // limits bound the Leases that wait at once (in all, and per certificate identity).
  // core (not owned) must outlive this.
  explicit WorkerServiceImpl(RunCore* core, Redactor redactor = Redactor(),
                             WorkerSessions sessions = WorkerSessions(),
                             Clock* clock = RealClockInstance(), CallLimits limits = {})
      : core_(core),
        redactor_(std::move(redactor)),
        sessions_(std::move(sessions)),
        clock_(clock),
        quota_(limits) {}

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* context,
                                     const v1::RegisterRequest* request,
                                     v1::RegisterResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::ServerUnaryReactor* Lease(grpc::CallbackServerContext* context,
                                  const v1::LeaseRequest* request,
                                  v1::LeaseResponse* response) override ABSL_LOCKS_EXCLUDED(mu_);
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);
  grpc::ServerUnaryReactor* Report(grpc::CallbackServerContext* context,
                                   const v1::ReportRequest* request,
                                   v1::ReportResponse* response) override ABSL_LOCKS_EXCLUDED(mu_);
  grpc::ServerUnaryReactor* Complete(grpc::CallbackServerContext* context,
                                     const v1::CompleteRequest* request,
                                     v1::CompleteResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);

  // Answers the waiting leases that can now get work, and those whose wait ran out. Call it
  // after the core's step (lapsed leases requeue trials).
  void ServeWaiting() ABSL_LOCKS_EXCLUDED(mu_);
  // Finishes every waiting Lease (with `done`), before the server shuts down; a Lease that
  // arrives afterwards (still in flight on a slow link) is answered `done` at once.
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether every registered worker has been answered `done` (by Lease or Drain).
  bool AllToldDone() ABSL_LOCKS_EXCLUDED(mu_);
  // The first store or internal error met while serving (OK when none).
  absl::Status fatal_error() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiting {
    grpc::CallbackServerContext* context;
    grpc::ServerUnaryReactor* reactor;
    int64_t worker_id;
    v1::LeaseResponse* response;
    absl::Time deadline;
    CallQuota::Ticket ticket;  // its place while it waits
  };
  // Runs f (returning absl::Status) under the lock and finishes the call with its status;
  // with serve_waiting, then also answers waiting leases that may now get work. f is a lambda
  // declared ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_).
  template <typename F>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, bool serve_waiting, F&& f)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Gives work to waiting leases that can take it; finishes those whose wait ran out.
  void ServeWaitingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteErrorLocked(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK when the call comes from the caller that registered worker_id (WorkerSessions::Check).
  absl::Status CheckSessionLocked(grpc::CallbackServerContext* context, int64_t worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Masks secrets in the free text of measurements (events) in place.
  void Redact(google::protobuf::RepeatedPtrField<v1::Measurement>* ms) const;

  absl::Mutex mu_;
  RunCore* const core_;
  const Redactor redactor_;
  std::deque<Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;        // set by Drain
  std::set<int64_t> told_done_ ABSL_GUARDED_BY(mu_);  // workers answered `done`
  WorkerSessions sessions_ ABSL_GUARDED_BY(mu_);
  Clock* clock_;
  CallQuota quota_;
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SERVICE_WORKER_SERVICE_H_
