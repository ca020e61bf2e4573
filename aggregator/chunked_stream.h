// The client side of a streamed call: one message per chunk of a long array, the first one
// carrying the header. PushUpdate and SecAggSubmit both stream this way.
#ifndef SEXTANT_AGGREGATOR_CHUNKED_STREAM_H_
#define SEXTANT_AGGREGATOR_CHUNKED_STREAM_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "rpc/status_conversion.h"

namespace sextant {

// Writes `size` elements `chunk` at a time (chunk >= 1) on writer: fill(offset, count,
// message) makes each message from the one before, and the message at offset 0 carries the
// header (fill clears it from the others). At least one message goes, for size 0 too. Stops at
// the first write the server refuses, then finishes the call. Returns the serialized bytes of
// every message written, or the server's status.
template <typename Message>
absl::StatusOr<int64_t> WriteChunked(
    grpc::ClientWriterInterface<Message>& writer, Message& message, int64_t size, int64_t chunk,
    const std::function<void(int64_t offset, int64_t count, Message& message)>& fill) {
  chunk = std::max<int64_t>(chunk, 1);
  int64_t sent = 0;
  for (int64_t off = 0; off < size || off == 0; off += chunk) {
    fill(off, std::min(chunk, size - off), message);
    sent += static_cast<int64_t>(message.ByteSizeLong());
    if (!writer.Write(message)) break;  // the server ended the call; Finish says why
    if (size == 0) break;
  }
  writer.WritesDone();
  absl::Status s = FromGrpcStatus(writer.Finish());
  if (!s.ok()) return s;
  return sent;
}

// A call's deadline `seconds` from now, for ClientContext::set_deadline.
inline std::chrono::system_clock::time_point DeadlineIn(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_CHUNKED_STREAM_H_
