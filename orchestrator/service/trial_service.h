#ifndef SEXTANT_ORCHESTRATOR_SERVICE_TRIAL_SERVICE_H_
#define SEXTANT_ORCHESTRATOR_SERVICE_TRIAL_SERVICE_H_

#include <deque>

#include "absl/status/status.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/ask_tell/ask_tell.h"
#include "orchestrator/core/run_core.h"
#include "rpc/call_quota.h"
#include "sextant/v1/trial_service.grpc.pb.h"

namespace sextant {

// The gRPC adapter over an AskTell core: each RPC converts, calls it while holding the run
// core (RunCore::Hold, the one lock over the dispatcher) and converts back. The caller's identity
// is its verified certificate's sextant:// URI ("" without one). An Ask that gets no trial waits
// (long-poll, at most kMaxAskWaitSeconds) until one can start, the run ends, or its wait runs
// out. Thread-safe.
// How long a finished run keeps answering asks `done` before its server stops.
inline constexpr double kFinishedGraceSeconds = 2;

class TrialServiceImpl final : public v1::TrialService::CallbackService {
 public:
  // run provides the lock and must outlive this; so must core (over run's dispatcher) and clock
  // (which times the long-polls and Drain's grace).
  // Each Ask that waits takes a place in a CallQuota of `limits` first (RESOURCE_EXHAUSTED
  // beyond it, in all or per certificate identity).
  TrialServiceImpl(RunCore* run, AskTell* core, Clock* clock = RealClockInstance(),
                   CallLimits limits = {})
      : run_(run), core_(core), clock_(clock), quota_(limits) {}

  grpc::ServerUnaryReactor* Ask(grpc::CallbackServerContext* context, const v1::AskRequest* request,
                                v1::AskResponse* response) override;
  grpc::ServerUnaryReactor* ReportStep(grpc::CallbackServerContext* context,
                                       const v1::ReportStepRequest* request,
                                       v1::ReportStepResponse* response) override;
  grpc::ServerUnaryReactor* Touch(grpc::CallbackServerContext* context,
                                  const v1::TouchRequest* request,
                                  v1::TouchResponse* response) override;
  grpc::ServerUnaryReactor* Tell(grpc::CallbackServerContext* context,
                                 const v1::TellRequest* request,
                                 v1::TellResponse* response) override;

  // Answers waiting asks that can now get trials, and those whose wait ran out. Call it after
  // the run core's step (lapsed leases requeue trials).
  void Tick();
  // Answers every waiting Ask with done, and every later one at once (the run is ending). When
  // the search has finished, returns only after kFinishedGraceSeconds more, so that a client
  // that asks right after the last tell hears done rather than finding the server gone. A
  // second call returns at once.
  void Drain();
  // The first store or internal error met while serving (OK when none).
  absl::Status fatal_error();

 private:
  struct Waiting {
    grpc::CallbackServerContext* context;
    grpc::ServerUnaryReactor* reactor;
    v1::AskRequest request;
    std::string identity;
    v1::AskResponse* response;
    absl::Time deadline;
    CallQuota::Ticket ticket;  // its place while it waits
  };
  // Runs f (returning StatusOr<Response>) under the lock, finishes the call, and with
  // serve_waiting then answers waiting asks.
  template <typename Response, typename F>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, Response* response,
                                  bool serve_waiting, F&& f);
  void ServeWaitingLocked();
  void NoteErrorLocked(const absl::Status& status);

  RunCore* run_;
  AskTell* core_;
  Clock* clock_;
  CallQuota quota_;
  // Guarded by the run core's lock (RunCore::Hold).
  std::deque<Waiting> waiting_;
  bool draining_ = false;
  absl::Status fatal_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SERVICE_TRIAL_SERVICE_H_
