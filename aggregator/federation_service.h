// The server side of federated rounds: FederationService over a FederationHub and a SecAggHub,
// on gRPC's callback API. The calls a participant makes are in federation_calls.h; the bounds
// both sides share are in federation_wire.h.
#ifndef SEXTANT_AGGREGATOR_FEDERATION_SERVICE_H_
#define SEXTANT_AGGREGATOR_FEDERATION_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "aggregator/federation_hub.h"
#include "aggregator/federation_wire.h"
#include "aggregator/secagg_hub.h"
#include "aggregator/sender_gate.h"
#include "aggregator/transfer_meter.h"
#include "federation/update_codec.h"
#include "grpcpp/grpcpp.h"
#include "rpc/call_quota.h"
#include "rpc/identity.h"
#include "sextant/v1/federation_service.grpc.pb.h"

namespace sextant {

// Answers Join (participants started by hand): the plan for the caller's verified identity,
// which runs on `pool` (the run's pool it named, an id already checked; empty: none),
// PermissionDenied for one it takes no part for, InvalidArgument for a pool that cannot host
// it, ResourceExhausted when no place is left.
using JoinHandler =
    std::function<absl::StatusOr<v1::JoinPlan>(const PeerIdentity& caller, const std::string& pool)>;
// Takes ReportJoin: `caller` (verified) says its client `client_id` joined on `pool` (both ids
// already checked). OK, PermissionDenied or InvalidArgument as ReportJoin says.
using JoinReportHandler = std::function<absl::Status(
    const PeerIdentity& caller, const std::string& client_id, const std::string& pool)>;

// GetRound's logic without its transport (the reactor parks between Polls; the fuzz target
// drives it directly): the gate's check of the caller, the round asked for, then the messages
// to write. Not thread-safe: one call's steps come one at a time.
class RoundServing {
 public:
  // hub and gate must outlive it. chunk_floats (at least 1) bounds each model chunk.
  RoundServing(FederationHub* hub, SenderGate* gate, std::optional<PeerIdentity> caller,
               int64_t chunk_floats, v1::RoundRequest request);

  // The gate's check of request.client_id against caller (InvalidArgument, PermissionDenied).
  absl::Status Check() const;
  // How long the call may wait for a round: request.wait_seconds within [0, 30] (NaN or
  // negative: 0).
  absl::Duration wait() const;
  // Asks the hub once, without waiting: true once the answer is decided (a round to train, or
  // the end); false while there is none (ask again until wait() has passed, then write the
  // kWait answer). The hub's error: Aborted for another experiment.
  absl::StatusOr<bool> Poll();
  // The next message: true with *out set; false once all are written. First the assignment,
  // then (a round to train) the model in chunks of chunk_floats. Unavailable when the round
  // was replaced meanwhile, DataLoss when the model file is short.
  absl::StatusOr<bool> Next(v1::ModelChunk* out);

 private:
  FederationHub* hub_;
  SenderGate* gate_;
  std::optional<PeerIdentity> caller_;
  int64_t chunk_floats_;
  v1::RoundRequest request_;
  RoundTask task_;
  int64_t next_offset_ = -1;  // -1: the assignment is next
  std::vector<float> buffer_;
};

// PushUpdate's logic without its transport. The first chunk carries the header (experiment,
// round, client, total_size, weight, count, metrics); every chunk must repeat its experiment,
// round and client and hold whole values of its encoding, decoded to float32 before the hub
// sees them. Not thread-safe: one call's steps come one at a time.
class UpdateReceiving {
 public:
  // hub and gate must outlive it.
  UpdateReceiving(FederationHub* hub, SenderGate* gate, std::optional<PeerIdentity> caller);

  // The first chunk: the gate checks its client against caller and its weight and count
  // (InvalidArgument, PermissionDenied); an encoding other than F32 has its segments and
  // scales checked (UpdateDecoder::Create), an aggregator's client timings theirs
  // (InvalidArgument). Nothing is staged on error. The chunk's values wait for TryBegin.
  absl::Status Start(v1::ModelChunk first);
  // Takes the hub's staging buffer without waiting, then stages the first chunk's values: true
  // once taken; false while another sender holds it (ask again: the hub cuts a holder that
  // stalls off after its stall timeout); otherwise the error that ends the call.
  absl::StatusOr<bool> TryBegin();
  // A later chunk: another experiment, round or client is Aborted, a partial value
  // InvalidArgument (the staged values are dropped); otherwise the hub's error.
  absl::Status Add(const v1::ModelChunk& chunk);
  // The stream ended: cancelled, the staged values are dropped (Cancelled, not a rejection);
  // otherwise the hub folds the update (its error) and receipt is filled.
  absl::Status End(bool cancelled, v1::UpdateReceipt* receipt);
  // Frees the hub's staging buffer if this update holds it (a call that ended early).
  // Idempotent.
  void Drop();

 private:
  FederationHub* hub_;
  SenderGate* gate_;
  std::optional<PeerIdentity> caller_;
  UpdateHeader header_;
  int64_t count_ = 1;
  std::optional<UpdateDecoder> decoder_;
  SenderMetrics metrics_;
  int64_t rejected_ = 0;
  std::vector<std::pair<std::string, double>> client_seconds_;
  v1::ModelChunk first_;
  bool staging_ = false;  // holds the hub's staging buffer
  int64_t received_ = 0;
  std::vector<float> scratch_;
};

// The server side of FederationService, on gRPC's callback API: a call that waits (a long-poll
// for a round or a SecAgg stage, a sender waiting for a staging buffer) is parked on its hub's
// WaitList and holds no thread. Each call takes a place in a CallQuota first (at most
// limits.max_calls at once, limits.per_identity per certificate identity; RESOURCE_EXHAUSTED
// beyond). The caller's identity comes from its verified certificate (CallerIdentity), and the
// SenderGate checks every sender id and claim against it. Thread-safe.
class FederationServiceImpl final : public v1::FederationService::CallbackService {
 public:
  // hub (and secagg and gate, when given) must outlive the service, and the service its
  // server. chunk_floats bounds each streamed message. Without secagg the SecAgg RPCs answer
  // FAILED_PRECONDITION (secure aggregation off). Without gate, a default one (ids bounded,
  // identities bound, no tier policy).
  explicit FederationServiceImpl(FederationHub* hub, int64_t chunk_floats = kDefaultChunkFloats,
                                 SecAggHub* secagg = nullptr, SenderGate* gate = nullptr,
                                 CallLimits limits = {});

  // Join answers through `join` (set before serving; without one, FAILED_PRECONDITION).
  void SetJoinHandler(JoinHandler join) { join_ = std::move(join); }
  // ReportJoin answers through `report` (set before serving; without one, FAILED_PRECONDITION).
  void SetJoinReportHandler(JoinReportHandler report) { join_report_ = std::move(report); }
  // Counts every accepted sender's message bytes here (set before serving; not owned, must
  // outlive the service). Default none.
  void SetTransferMeter(TransferMeter* meter) { meter_ = meter; }
  CallQuota& quota() { return quota_; }

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const v1::JoinRequest* request, v1::JoinPlan* reply) override;
  grpc::ServerUnaryReactor* ReportJoin(grpc::CallbackServerContext* context,
                                       const v1::JoinedClient* request,
                                       v1::JoinedReceipt* reply) override;
  grpc::ServerWriteReactor<v1::ModelChunk>* GetRound(grpc::CallbackServerContext* context,
                                                     const v1::RoundRequest* request) override;
  grpc::ServerUnaryReactor* ReportFailure(grpc::CallbackServerContext* context,
                                          const v1::ParticipantFailure* request,
                                          v1::FailureReceipt* reply) override;
  grpc::ServerReadReactor<v1::ModelChunk>* PushUpdate(grpc::CallbackServerContext* context,
                                                      v1::UpdateReceipt* receipt) override;
  grpc::ServerUnaryReactor* SecAggAwait(grpc::CallbackServerContext* context,
                                        const v1::SecAggPoll* request,
                                        v1::SecAggMessage* reply) override;
  grpc::ServerReadReactor<v1::SecAggMessage>* SecAggSubmit(grpc::CallbackServerContext* context,
                                                           v1::SecAggReceipt* receipt) override;

 private:
  grpc::Status JoinPlanFor(const grpc::CallbackServerContext& context,
                           const v1::JoinRequest& request, v1::JoinPlan* reply);
  grpc::Status RecordFailure(const grpc::CallbackServerContext& context,
                             const v1::ParticipantFailure& request);

  FederationHub* hub_;
  int64_t chunk_floats_;
  SecAggHub* secagg_;
  SenderGate own_gate_;
  SenderGate* gate_;
  CallQuota quota_;
  JoinHandler join_;
  JoinReportHandler join_report_;
  TransferMeter* meter_ = nullptr;
};

// gRPC server interceptors for a tier's server, made afresh for each server it starts: an
// operator's audit of every call, or a test that plays a modified aggregator. Empty: none.
using ServerInterceptors = std::function<
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>()>;

// Starts a server for `service` on `listen` (e.g. "127.0.0.1:0"); *port receives the bound port.
// credentials: TLS/mTLS with its auth processor (MakeServerCredentials); null is plaintext.
// quota, when given, bounds the server's memory. Messages are at most 8 MiB each way.
// interceptors, when set, are installed on the server. Unavailable when it cannot listen.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartFederationServer(
    const std::string& listen, grpc::Service* service, int* port,
    std::shared_ptr<grpc::ServerCredentials> credentials = nullptr,
    grpc::ResourceQuota* quota = nullptr, const ServerInterceptors& interceptors = {});

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_FEDERATION_SERVICE_H_
