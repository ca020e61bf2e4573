// The calls a participant makes on FederationService (the client side): join by hand, report
// a join or a failure, pull a round's model, push an update. Each checks what the server sends
// against federation_wire.h's bounds before it keeps it. The server is federation_service.h.
#ifndef SEXTANT_AGGREGATOR_FEDERATION_CALLS_H_
#define SEXTANT_AGGREGATOR_FEDERATION_CALLS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "aggregator/federation_hub.h"
#include "aggregator/federation_wire.h"
#include "federation/round_coordinator.h"
#include "federation/update_codec.h"
#include "sextant/v1/federation_service.grpc.pb.h"

namespace sextant {

// Asks upstream once what to run with (a participant started by hand): the plan, checked
// against federation_wire.h's bounds (InvalidArgument past them), or the server's status (Unavailable, with
// gRPC's reason, while it cannot be reached or the TLS handshake fails), within
// deadline_seconds.
absl::StatusOr<v1::JoinPlan> JoinUpstream(v1::FederationService::StubInterface* stub,
                                          const std::string& experiment_id,
                                          double deadline_seconds, const std::string& pool = "");

// Tells the tier above that client `client_id` of this region joined on `pool` (ReportJoin):
// OK or the server's status, within deadline_seconds.
absl::Status ReportJoin(v1::FederationService::StubInterface* stub,
                        const std::string& experiment_id, const std::string& client_id,
                        const std::string& pool, double deadline_seconds = 10);

// Tells the tier above (or a client's aggregator) that `failed` sends no update for `round`,
// and why (cut to kMaxFailureErrorBytes, keeping its end, where a command's stderr tail is).
// The server's status otherwise (Aborted once the round is over).
absl::Status ReportFailure(v1::FederationService::StubInterface* stub,
                           const std::string& experiment_id, int64_t round,
                           const std::string& client_id, const std::string& failed,
                           const std::string& error, double deadline_seconds = 10);

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

#endif  // SEXTANT_AGGREGATOR_FEDERATION_CALLS_H_
