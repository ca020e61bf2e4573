// The one conversion between gRPC's and Abseil's status types. Their codes map 1:1.
#ifndef SEXTANT_RPC_STATUS_CONVERSION_H_
#define SEXTANT_RPC_STATUS_CONVERSION_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace sextant {

// The same code and message as a grpc::Status (OK stays OK).
grpc::Status ToGrpcStatus(const absl::Status& status);

// The same code and message as an absl::Status (OK stays OK).
absl::Status FromGrpcStatus(const grpc::Status& status);

// True for an answer that is the caller's business (OK, or a refusal of its request: Aborted,
// NotFound, FailedPrecondition, InvalidArgument, PermissionDenied, ResourceExhausted). Anything
// else from a service's core means the server itself failed (e.g. its store), and it must stop
// rather than acknowledge what it cannot keep.
bool IsCallersBusiness(const absl::Status& status);

}  // namespace sextant

#endif  // SEXTANT_RPC_STATUS_CONVERSION_H_
