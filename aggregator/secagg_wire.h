// Secure aggregation on the wire: conversions between the federation proto's SecAgg messages and
// the plain structs of federation/secagg_messages.h, and the two calls a client makes
// (SecAggAwait, SecAggSubmit). Proto stays in this file pair and federation_service.*.
#ifndef SEXTANT_AGGREGATOR_SECAGG_WIRE_H_
#define SEXTANT_AGGREGATOR_SECAGG_WIRE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "aggregator/secagg_hub.h"
#include "federation/round_coordinator.h"
#include "federation/secagg_messages.h"
#include "sextant/v1/federation_service.grpc.pb.h"

namespace sextant {

// Ring elements per masked-input chunk by default (1 MiB at 32-bit packing).
inline constexpr int64_t kDefaultSecAggChunkElements = 1 << 18;

// The header fields of a wire message (sender and recipient are the hub's to fill).
// InvalidArgument for a stage outside 0..5.
absl::StatusOr<SecAggHeader> HeaderFromProto(const v1::SecAggMessage& m);

// Server -> client. DownlinkFromProto: InvalidArgument for a malformed message (a key or nonce
// of the wrong size, a stage outside 0..5).
v1::SecAggMessage DownlinkToProto(const SecAggDownlink& d, const std::string& experiment_id,
                                  int64_t round, const std::string& client_id);
absl::StatusOr<SecAggDownlink> DownlinkFromProto(const v1::SecAggMessage& m);

// Client -> server, one message each. *FromProto: InvalidArgument for a malformed body (a
// missing body, a key, commitment or nonce of the wrong size, an unknown share kind).
// A public key's 32 bytes as a string (as the wire and key signatures carry it).
std::string KeyBytes(const SecAggPublicKey& key);

v1::SecAggMessage KeysToProto(const SecAggAdvertiseKeys& m, const std::string& client_id);
absl::StatusOr<SecAggAdvertiseKeys> KeysFromProto(const v1::SecAggMessage& m);
v1::SecAggMessage SharesToProto(const SecAggShareKeys& m, const std::string& client_id);
absl::StatusOr<SecAggShareKeys> SharesFromProto(const v1::SecAggMessage& m);
v1::SecAggMessage RevealToProto(const SecAggUnmaskResponse& m, const std::string& client_id);
absl::StatusOr<SecAggUnmaskResponse> RevealFromProto(const v1::SecAggMessage& m);

// SecAggAwait: the message that opens `stage` for client_id, or pending after wait_seconds.
// Errors: the server's status.
absl::StatusOr<SecAggDownlink> AwaitSecAgg(v1::FederationService::StubInterface* stub,
                                           const std::string& experiment_id, int64_t round,
                                           SecAggStage stage, const std::string& client_id,
                                           double wait_seconds);

// Buffered rounds: SecAggAwait asking into the next SecAgg instance with an update trained on
// model version base_version (SecAggHub::Join). The start, once it comes, is the instance's:
// its config's round is the instance. Pending when none took the client within wait_seconds.
absl::StatusOr<SecAggDownlink> JoinSecAgg(v1::FederationService::StubInterface* stub,
                                          const std::string& experiment_id, int64_t base_version,
                                          const std::string& client_id, double wait_seconds);

// SecAggSubmit of one message (keys, shares or revealed shares). Returns the bytes sent, or the
// server's status.
absl::StatusOr<int64_t> SubmitSecAgg(v1::FederationService::StubInterface* stub,
                                     const v1::SecAggMessage& message);

// SecAggSubmit of a masked input, packed at ring_bits per element in chunks of chunk_elements,
// with the sender's scalar metrics on the first chunk (and, from a regional aggregator, the
// clients behind its sum and the updates it rejected; nullopt and 0 for a client). Returns the
// bytes sent, or the server's status.
absl::StatusOr<int64_t> SubmitMaskedInput(v1::FederationService::StubInterface* stub,
                                          const SecAggMaskedInput& input,
                                          const std::string& client_id, int ring_bits,
                                          const SenderMetrics& metrics,
                                          int64_t chunk_elements = kDefaultSecAggChunkElements,
                                          std::optional<int64_t> clients = std::nullopt,
                                          int64_t rejected = 0);
// The same for a masked input held in a RingVector (its ring is the round's).
absl::StatusOr<int64_t> SubmitMaskedInput(v1::FederationService::StubInterface* stub,
                                          const SecAggHeader& header, const RingVector& values,
                                          const std::string& client_id,
                                          const SenderMetrics& metrics,
                                          int64_t chunk_elements = kDefaultSecAggChunkElements,
                                          std::optional<int64_t> clients = std::nullopt,
                                          int64_t rejected = 0);

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_SECAGG_WIRE_H_
