#include "aggregator/federation_calls.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "aggregator/chunked_stream.h"
#include "grpcpp/grpcpp.h"
#include "rpc/status_conversion.h"

namespace sextant {
namespace {

// The task a round assignment names, for `round`.
RoundTask FromProto(const v1::RoundAssignment& a, int64_t round) {
  RoundTask t;
  t.kind = a.kind() == v1::RoundAssignment::TRAIN  ? RoundTask::Kind::kTrain
           : a.kind() == v1::RoundAssignment::DONE ? RoundTask::Kind::kDone
                                                   : RoundTask::Kind::kWait;
  t.round = round;
  t.participants.assign(a.participants().begin(), a.participants().end());
  t.deadline_seconds = a.deadline_seconds();
  t.min_updates = a.min_updates();
  t.seed = a.seed();
  t.model_size = a.model_size();
  t.quantizer_bits = a.quantizer_bits();
  t.segments.assign(a.segments().begin(), a.segments().end());
  t.segment_clips.assign(a.segment_clips().begin(), a.segment_clips().end());
  return t;
}

}  // namespace

absl::Status ReportFailure(v1::FederationService::StubInterface* stub,
                           const std::string& experiment_id, int64_t round,
                           const std::string& client_id, const std::string& failed,
                           const std::string& error, double deadline_seconds) {
  v1::ParticipantFailure request;
  request.set_experiment_id(experiment_id);
  request.set_round(round);
  request.set_client_id(client_id);
  request.set_failed(failed);
  request.set_error(error.size() > kMaxFailureErrorBytes
                        ? "..." + error.substr(error.size() - kMaxFailureErrorBytes + 3)
                        : error);
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(deadline_seconds));
  v1::FailureReceipt reply;
  return FromGrpcStatus(stub->ReportFailure(&context, request, &reply));
}

absl::Status ReportJoin(v1::FederationService::StubInterface* stub,
                        const std::string& experiment_id, const std::string& client_id,
                        const std::string& pool, double deadline_seconds) {
  v1::JoinedClient request;
  request.set_experiment_id(experiment_id);
  request.set_client_id(client_id);
  request.set_pool(pool);
  v1::JoinedReceipt receipt;
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(deadline_seconds));
  return FromGrpcStatus(stub->ReportJoin(&context, request, &receipt));
}

absl::StatusOr<v1::JoinPlan> JoinUpstream(v1::FederationService::StubInterface* stub,
                                          const std::string& experiment_id,
                                          double deadline_seconds, const std::string& pool) {
  v1::JoinRequest request;
  request.set_experiment_id(experiment_id);
  request.set_pool(pool);
  v1::JoinPlan plan;
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(deadline_seconds));
  if (grpc::Status s = stub->Join(&context, request, &plan); !s.ok()) return FromGrpcStatus(s);
  size_t flag_bytes = 0;
  for (const std::string& f : plan.flags()) flag_bytes += f.size();
  if (plan.spec_signature().size() > kMaxAttestationSignatureBytes ||
      plan.spec_certificate().size() > kMaxAttestationCertificateBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the join plan's signature (", plan.spec_signature().size(), " bytes) or certificate (",
        plan.spec_certificate().size(), " bytes) is over ", kMaxAttestationSignatureBytes, " or ",
        kMaxAttestationCertificateBytes, " bytes"));
  }
  if (plan.spec().size() > kMaxJoinSpecBytes || flag_bytes > kMaxJoinFlagBytes ||
      plan.flags_size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the join plan has ", plan.flags_size(), " flag words of ", flag_bytes,
        " bytes and an experiment of ", plan.spec().size(), " bytes (flags go in pairs, at most ",
        kMaxJoinFlagBytes, " bytes; an experiment at most ", kMaxJoinSpecBytes, ")"));
  }
  return plan;
}

absl::StatusOr<RoundTask> PullRound(
    v1::FederationService::StubInterface* stub, const std::string& experiment_id,
    const std::string& client_id, int64_t after_round, double wait_seconds,
    const std::function<absl::Status(int64_t, absl::Span<const float>)>& sink) {
  v1::RoundRequest request;
  request.set_experiment_id(experiment_id);
  request.set_client_id(client_id);
  request.set_round(after_round);
  request.set_wait_seconds(wait_seconds);
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(static_cast<int64_t>(wait_seconds) + 600));
  std::unique_ptr<grpc::ClientReaderInterface<v1::ModelChunk>> reader =
      stub->GetRound(&context, request);
  v1::ModelChunk chunk;
  if (!reader->Read(&chunk)) return FromGrpcStatus(reader->Finish());
  if (chunk.assignment().segments_size() > kMaxUpdateSegments ||
      (chunk.assignment().segment_clips_size() != 0 &&
       chunk.assignment().segment_clips_size() != chunk.assignment().segments_size())) {
    context.TryCancel();
    return absl::InvalidArgumentError(
        absl::StrCat("round assignment: ", chunk.assignment().segments_size(), " segments and ",
                     chunk.assignment().segment_clips_size(),
                     " ranges; ranges must be none or one per "
                     "segment, at most ",
                     kMaxUpdateSegments));
  }
  RoundTask task = FromProto(chunk.assignment(), chunk.round());
  std::vector<float> scratch;
  int64_t received = 0;
  absl::Status sink_status;
  while (reader->Read(&chunk)) {
    if (!sink_status.ok()) continue;
    if (chunk.round() != task.round || chunk.offset() != received) {
      sink_status = absl::DataLossError("model chunks out of order");
      context.TryCancel();
      continue;
    }
    absl::Span<const float> v = AsFloats(chunk.data(), scratch);
    sink_status = sink(chunk.offset(), v);
    received += static_cast<int64_t>(v.size());
  }
  absl::Status s = FromGrpcStatus(reader->Finish());
  if (!sink_status.ok()) return sink_status;
  if (!s.ok()) return s;
  if (task.kind == RoundTask::Kind::kTrain && received != task.model_size) {
    return absl::DataLossError(
        absl::StrCat("model stream ended after ", received, " of ", task.model_size, " values"));
  }
  return task;
}

namespace {

// The first chunk's header fields, without offset and data.
v1::ModelChunk FirstChunk(const PushHeader& header, int64_t total_size) {
  v1::ModelChunk chunk;
  chunk.set_experiment_id(header.experiment_id);
  chunk.set_round(header.round);
  chunk.set_client_id(header.client_id);
  chunk.set_total_size(total_size);
  chunk.set_weight(header.weight);
  chunk.set_count(header.count);
  chunk.mutable_metrics()->set_train_loss(header.metrics.train_loss);
  chunk.mutable_metrics()->set_eval_loss(header.metrics.eval_loss);
  chunk.mutable_metrics()->set_eval_accuracy(header.metrics.eval_accuracy);
  chunk.mutable_metrics()->set_eval_weight(header.metrics.eval_weight);
  chunk.mutable_metrics()->set_rejected(header.rejected);
  for (const auto& [id, seconds] : header.client_seconds) {
    v1::ClientSeconds* c = chunk.mutable_metrics()->add_client_seconds();
    c->set_client_id(id);
    c->set_seconds(seconds);
  }
  return chunk;
}

// Streams d values held `width` bytes each in `bytes`, chunk_values at a time, after the header
// in `chunk`. Returns the serialized bytes of every message, or the server's status.
absl::StatusOr<int64_t> StreamUpdate(v1::FederationService::StubInterface* stub,
                                     v1::ModelChunk chunk, const char* bytes, int64_t d, int width,
                                     int64_t chunk_values) {
  grpc::ClientContext context;
  v1::UpdateReceipt receipt;
  std::unique_ptr<grpc::ClientWriterInterface<v1::ModelChunk>> writer =
      stub->PushUpdate(&context, &receipt);
  return WriteChunked<v1::ModelChunk>(
      *writer, chunk, d, chunk_values, [&](int64_t off, int64_t n, v1::ModelChunk& c) {
        if (off != 0) {  // header fields go with the first chunk only
          c.clear_total_size();
          c.clear_weight();
          c.clear_count();
          c.clear_metrics();
          c.clear_encoding();
          c.clear_segments();
          c.clear_scales();
        }
        c.set_offset(off);
        c.set_data(bytes + off * width, n * width);
      });
}

}  // namespace

absl::StatusOr<int64_t> PushUpdate(v1::FederationService::StubInterface* stub,
                                   const PushHeader& header, absl::Span<const float> values,
                                   int64_t chunk_floats) {
  const int64_t d = static_cast<int64_t>(values.size());
  return StreamUpdate(stub, FirstChunk(header, d), reinterpret_cast<const char*>(values.data()), d,
                      sizeof(float), chunk_floats);
}

absl::StatusOr<int64_t> PushUpdate(v1::FederationService::StubInterface* stub,
                                   const PushHeader& header, const EncodedUpdate& update,
                                   int64_t chunk_floats) {
  v1::ModelChunk first = FirstChunk(header, update.size);
  first.set_encoding(update.mode == UpdateCompression::kF16    ? v1::ModelChunk::F16
                     : update.mode == UpdateCompression::kInt8 ? v1::ModelChunk::INT8
                                                               : v1::ModelChunk::F32);
  for (int64_t s : update.segments) first.add_segments(s);
  for (float s : update.scales) first.add_scales(s);
  // Chunks of the same bytes as float32's: fewer values are narrower.
  const int width = UpdateBytesPerElement(update.mode);
  return StreamUpdate(stub, std::move(first), update.payload.data(), update.size, width,
                      chunk_floats * static_cast<int64_t>(sizeof(float)) / width);
}

}  // namespace sextant
