// The gRPC side of federated rounds: FederationService over a FederationHub (the server), and
// the two calls a participant makes (the client). Proto stays in this file pair.
#ifndef SEXTANT_AGGREGATOR_FEDERATION_SERVICE_H_
#define SEXTANT_AGGREGATOR_FEDERATION_SERVICE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "aggregator/federation_hub.h"
#include "aggregator/secagg_hub.h"
#include "aggregator/sender_gate.h"
#include "federation/update_codec.h"
#include "grpcpp/grpcpp.h"
#include "rpc/identity.h"
#include "sextant/v1/federation_service.grpc.pb.h"

namespace sextant {

// The largest key attestation a SecAgg participant may send (its certificate and signature),
// relayed to each of its neighbours.
inline constexpr size_t kMaxAttestationCertificateBytes = 8192;
inline constexpr size_t kMaxAttestationSignatureBytes = 256;

// Floats per chunk by default: 1 MiB.
inline constexpr int64_t kDefaultChunkFloats = (1 << 20) / sizeof(float);

// Answers Join (participants started by hand): the plan for the caller's verified identity,
// PermissionDenied for one it takes no part for, ResourceExhausted when no place is left.
using JoinHandler = std::function<absl::StatusOr<v1::JoinPlan>(const PeerIdentity& caller)>;

// The most bytes of an experiment a JoinPlan may carry, and of flags in all.
inline constexpr size_t kMaxJoinSpecBytes = size_t{4} << 20;
inline constexpr size_t kMaxJoinFlagBytes = 64 << 10;

// Thin adapter: takes the caller's identity from its verified certificate (IdentityOf), has
// the SenderGate check every sender id and claim against it, converts messages, calls the hub
// and converts the status back. Thread-safe (gRPC's sync server calls it from several threads).
class FederationServiceImpl final : public v1::FederationService::Service {
 public:
  // hub (and secagg and gate, when given) must outlive the service. chunk_floats bounds each
  // streamed message. Without secagg the SecAgg RPCs answer FAILED_PRECONDITION (secure
  // aggregation off). Without gate, a default one (ids bounded, identities bound, no tier
  // policy).
  explicit FederationServiceImpl(FederationHub* hub, int64_t chunk_floats = kDefaultChunkFloats,
                                 SecAggHub* secagg = nullptr, SenderGate* gate = nullptr)
      : hub_(hub),
        chunk_floats_(chunk_floats),
        secagg_(secagg),
        gate_(gate != nullptr ? gate : &own_gate_) {}

  // Join answers through `join` (set before serving; without one, FAILED_PRECONDITION).
  void SetJoinHandler(JoinHandler join) { join_ = std::move(join); }

  grpc::Status Join(grpc::ServerContext* context, const v1::JoinRequest* request,
                    v1::JoinPlan* reply) override;
  grpc::Status GetRound(grpc::ServerContext* context, const v1::RoundRequest* request,
                        grpc::ServerWriter<v1::ModelChunk>* writer) override;
  grpc::Status PushUpdate(grpc::ServerContext* context, grpc::ServerReader<v1::ModelChunk>* reader,
                          v1::UpdateReceipt* receipt) override;
  grpc::Status SecAggAwait(grpc::ServerContext* context, const v1::SecAggPoll* request,
                           v1::SecAggMessage* reply) override;
  grpc::Status SecAggSubmit(grpc::ServerContext* context,
                            grpc::ServerReader<v1::SecAggMessage>* reader,
                            v1::SecAggReceipt* receipt) override;

 private:
  grpc::Status SubmitMasked(grpc::ServerContext* context, v1::SecAggMessage& first,
                            grpc::ServerReader<v1::SecAggMessage>* reader);

  // The caller's certificate identity, when it has one; refuses a sender it may not act as.
  grpc::Status CheckSender(grpc::ServerContext* context, const std::string& sender_id) const;

  FederationHub* hub_;
  int64_t chunk_floats_;
  SecAggHub* secagg_;
  SenderGate own_gate_;
  SenderGate* gate_;
  JoinHandler join_;
};

// GetRound's logic over any transport: the gate checks request.client_id against caller
// (INVALID_ARGUMENT, PERMISSION_DENIED), then it waits (request.wait_seconds, clamped to
// [0, 30]; NaN or negative is 0) for the caller's next round, then write()s the assignment and,
// for TRAIN, the model in chunks of chunk_floats (at least 1). Returns the hub's status (Aborted
// for another experiment), UNAVAILABLE when a write fails, CANCELLED when cancelled() turns true.
grpc::Status ServeRound(FederationHub* hub, SenderGate& gate,
                        const std::optional<PeerIdentity>& caller, int64_t chunk_floats,
                        const v1::RoundRequest& request,
                        const std::function<bool(const v1::ModelChunk&)>& write,
                        const std::function<bool()>& cancelled);

// PushUpdate's logic over any transport: read() yields the stream's chunks (false at its end).
// The first carries the header (experiment, round, client, total_size, weight, count, metrics);
// the gate checks its client against caller and its weight and count (INVALID_ARGUMENT,
// PERMISSION_DENIED; nothing is staged), and an encoding other than F32 has its segments and
// scales checked (UpdateDecoder::Create: INVALID_ARGUMENT, nothing is staged). Every chunk must
// repeat its experiment, round and client (ABORTED otherwise) and hold whole values of the
// encoding (INVALID_ARGUMENT otherwise), decoded to float32 before the hub sees them. A
// stream that breaks off (cancelled()) or is refused mid-way frees the hub's staging buffer;
// one that stalls while another sender waits is cut off (ABORTED). OK fills receipt; otherwise
// the hub's status.
grpc::Status ReceiveUpdate(FederationHub* hub, SenderGate& gate,
                           const std::optional<PeerIdentity>& caller,
                           const std::function<bool(v1::ModelChunk*)>& read,
                           const std::function<bool()>& cancelled, v1::UpdateReceipt* receipt);

// Starts a server for `service` on `listen` (e.g. "127.0.0.1:0"); *port receives the bound port.
// credentials: TLS/mTLS with its auth processor (MakeServerCredentials); null is plaintext.
// quota, when given, bounds the server's threads. Messages are at most 8 MiB each way.
// Unavailable when it cannot listen.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartFederationServer(
    const std::string& listen, grpc::Service* service, int* port,
    std::shared_ptr<grpc::ServerCredentials> credentials = nullptr,
    grpc::ResourceQuota* quota = nullptr);

// Asks upstream once what to run with (a participant started by hand): the plan, checked
// against the bounds above (InvalidArgument past them), or the server's status (Unavailable, with
// gRPC's reason, while it cannot be reached or the TLS handshake fails), within
// deadline_seconds.
absl::StatusOr<v1::JoinPlan> JoinUpstream(v1::FederationService::StubInterface* stub,
                                          const std::string& experiment_id,
                                          double deadline_seconds);

// Receives the next round's task and model. sink(offset, values) is called for each chunk in
// order (it may write them anywhere; nothing else holds the model). kWait and kDone carry no
// model. Errors: the server's status (Aborted for another experiment), or DataLoss when the
// stream ended early.
absl::StatusOr<RoundTask> PullRound(
    v1::FederationService::StubInterface* stub, const std::string& experiment_id,
    const std::string& client_id, int64_t after_round, double wait_seconds,
    const std::function<absl::Status(int64_t, absl::Span<const float>)>& sink);

// What one PushUpdate sends besides the values.
struct PushHeader {
  std::string experiment_id;
  int64_t round = 0;
  std::string client_id;
  double weight = 0;  // num_examples, or a region's total weight
  int64_t count = 1;  // client updates behind it
  SenderMetrics metrics;
  int64_t rejected = 0;  // from an aggregator: client updates it rejected this round
  // From an aggregator: each participant's seconds to deliver (UpdateMetrics.client_seconds).
  std::vector<std::pair<std::string, double>> client_seconds;
};

// Streams `values` in chunks of chunk_floats. Returns the payload bytes sent (the serialized
// sizes of every message), or the server's status.
absl::StatusOr<int64_t> PushUpdate(v1::FederationService::StubInterface* stub,
                                   const PushHeader& header, absl::Span<const float> values,
                                   int64_t chunk_floats = kDefaultChunkFloats);

// Streams an encoded update (federation.update_compression) in chunks of the same byte size as
// chunk_floats float32 values; the first chunk carries its encoding, segments and scales. The
// receiver decodes it to float32 before anything aggregates it. Returns the payload bytes sent
// (the serialized sizes of every message), or the server's status.
absl::StatusOr<int64_t> PushUpdate(v1::FederationService::StubInterface* stub,
                                   const PushHeader& header, const EncodedUpdate& update,
                                   int64_t chunk_floats = kDefaultChunkFloats);

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_FEDERATION_SERVICE_H_
