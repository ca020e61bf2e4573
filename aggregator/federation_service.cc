#include "aggregator/federation_service.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "aggregator/secagg_wire.h"
#include "common/ids.h"
#include "common/status_macros.h"
#include "federation/update_codec.h"
#include "rpc/key_signer.h"
#include "rpc/server_security.h"
#include "rpc/status_conversion.h"

namespace sextant {
namespace {

// A region's timings of its clients (UpdateMetrics.client_seconds): at most kMaxClientSeconds,
// each of a client "<sender>/<index>" of the sending region, once, with finite seconds >= 0.
// InvalidArgument otherwise: the update is refused whole rather than partly believed.
constexpr int kMaxClientSeconds = 1 << 16;
absl::StatusOr<std::vector<std::pair<std::string, double>>> ClientSecondsOf(
    const v1::UpdateMetrics& m, const std::string& sender) {
  std::vector<std::pair<std::string, double>> out;
  if (m.client_seconds_size() == 0) return out;
  if (m.client_seconds_size() > kMaxClientSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("client_seconds has ", m.client_seconds_size(),
                                                   " entries; at most ", kMaxClientSeconds));
  }
  const std::string prefix = sender + "/";
  std::set<std::string> seen;
  for (const v1::ClientSeconds& c : m.client_seconds()) {
    if (c.client_id().rfind(prefix, 0) != 0 || !seen.insert(c.client_id()).second ||
        !CheckClientId("client_seconds.client_id", c.client_id()).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "client_seconds names '", c.client_id().substr(0, 64), "': not a client of '", sender,
          "', or twice"));
    }
    if (!std::isfinite(c.seconds()) || c.seconds() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("client_seconds of '", c.client_id(), "' is ", c.seconds()));
    }
    out.emplace_back(c.client_id(), c.seconds());
  }
  return out;
}

// Floats travel as their native little-endian bytes (every supported host is little-endian).
absl::Span<const float> AsFloats(const std::string& bytes, std::vector<float>& scratch) {
  scratch.resize(bytes.size() / sizeof(float));
  std::memcpy(scratch.data(), bytes.data(), scratch.size() * sizeof(float));
  return scratch;
}

// The decoder of a PushUpdate whose first chunk names an encoding other than plain float32.
absl::StatusOr<UpdateDecoder> DecoderFor(const v1::ModelChunk& first) {
  UpdateCompression mode;
  switch (first.encoding()) {
    case v1::ModelChunk::F32:
      mode = UpdateCompression::kNone;
      break;
    case v1::ModelChunk::F16:
      mode = UpdateCompression::kF16;
      break;
    case v1::ModelChunk::INT8:
      mode = UpdateCompression::kInt8;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unknown update encoding ", static_cast<int>(first.encoding())));
  }
  // The repeated fields are already bounded by the message size; the decoder bounds them further
  // (kMaxUpdateSegments) before copying them.
  if (first.segments_size() > kMaxUpdateSegments || first.scales_size() > kMaxUpdateSegments) {
    return absl::InvalidArgumentError(
        absl::StrCat("update has more than ", kMaxUpdateSegments, " segments or scales"));
  }
  return UpdateDecoder::Create(
      mode, first.total_size(),
      std::vector<int64_t>(first.segments().begin(), first.segments().end()),
      std::vector<float>(first.scales().begin(), first.scales().end()));
}

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

grpc::Status ServeRound(FederationHub* hub, SenderGate& gate,
                        const std::optional<PeerIdentity>& caller, int64_t chunk_floats,
                        const v1::RoundRequest& request,
                        const std::function<bool(const v1::ModelChunk&)>& write,
                        const std::function<bool()>& cancelled) {
  if (absl::Status s = gate.CheckCaller(caller, request.client_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  chunk_floats = std::max<int64_t>(chunk_floats, 1);
  // NaN compares false both ways, so clamp() would pass it through as an endless wait.
  const double asked = request.wait_seconds();
  const double wait = asked >= 0 ? std::min(asked, 30.0) : 0.0;
  absl::StatusOr<RoundTask> task = hub->WaitForRound(request.experiment_id(), request.client_id(),
                                                     request.round(), absl::Seconds(wait));
  if (!task.ok()) return ToGrpcStatus(task.status());
  v1::ModelChunk first;
  first.set_experiment_id(request.experiment_id());
  first.set_client_id(request.client_id());
  first.set_round(task->round);
  v1::RoundAssignment* a = first.mutable_assignment();
  a->set_kind(task->kind == RoundTask::Kind::kTrain  ? v1::RoundAssignment::TRAIN
              : task->kind == RoundTask::Kind::kDone ? v1::RoundAssignment::DONE
                                                     : v1::RoundAssignment::WAIT);
  if (task->kind != RoundTask::Kind::kTrain) {
    write(first);
    return grpc::Status::OK;
  }
  for (const std::string& p : task->participants) a->add_participants(p);
  a->set_deadline_seconds(task->deadline_seconds);
  a->set_model_size(task->model_size);
  a->set_seed(task->seed);
  a->set_min_updates(static_cast<int32_t>(task->min_updates));
  a->set_quantizer_bits(task->quantizer_bits);
  for (int64_t n : task->segments) a->add_segments(n);
  for (double c : task->segment_clips) a->add_segment_clips(c);
  if (!write(first)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "client went away");
  std::vector<float> buf(std::min(chunk_floats, std::max<int64_t>(task->model_size, 1)));
  v1::ModelChunk chunk;
  chunk.set_experiment_id(request.experiment_id());
  chunk.set_client_id(request.client_id());
  chunk.set_round(task->round);
  for (int64_t off = 0; off < task->model_size; off += chunk_floats) {
    if (cancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    const int64_t n = std::min(chunk_floats, task->model_size - off);
    absl::Span<float> out(buf.data(), n);
    if (absl::Status s = hub->ReadModel(task->round, off, out); !s.ok()) return ToGrpcStatus(s);
    chunk.set_offset(off);
    chunk.set_data(reinterpret_cast<const char*>(out.data()), n * sizeof(float));
    if (!write(chunk)) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "client went away");
  }
  return grpc::Status::OK;
}

grpc::Status FederationServiceImpl::Join(grpc::ServerContext* context,
                                         const v1::JoinRequest* request, v1::JoinPlan* reply) {
  const std::optional<PeerIdentity> caller = CallerIdentity(*context);
  if (!caller) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "joining takes a certificate identity (sextant certs issue, --tls-dir)");
  }
  if (!join_) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this server starts its participants itself: none joins by hand");
  }
  if (!request->experiment_id().empty() && request->experiment_id() != hub_->experiment_id()) {
    return grpc::Status(grpc::StatusCode::ABORTED, "another experiment is served here");
  }
  absl::StatusOr<v1::JoinPlan> plan = join_(*caller);
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  *reply = *std::move(plan);
  reply->set_experiment_id(hub_->experiment_id());
  return grpc::Status::OK;
}

grpc::Status FederationServiceImpl::GetRound(grpc::ServerContext* context,
                                             const v1::RoundRequest* request,
                                             grpc::ServerWriter<v1::ModelChunk>* writer) {
  return ServeRound(
      hub_, *gate_, CallerIdentity(*context), chunk_floats_, *request,
      [&](const v1::ModelChunk& c) { return writer->Write(c); },
      [&] { return context->IsCancelled(); });
}

grpc::Status ReceiveUpdate(FederationHub* hub, SenderGate& gate,
                           const std::optional<PeerIdentity>& caller,
                           const std::function<bool(v1::ModelChunk*)>& read,
                           const std::function<bool()>& cancelled, v1::UpdateReceipt* receipt) {
  v1::ModelChunk chunk;
  if (!read(&chunk)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty update stream");
  }
  UpdateHeader header{chunk.experiment_id(), chunk.round(), chunk.client_id(), chunk.weight()};
  const int64_t count = std::max<int64_t>(chunk.count(), 1);
  if (chunk.total_size() < 0)
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "total_size < 0");
  absl::Status s = gate.CheckCaller(caller, header.client_id);
  if (s.ok()) s = gate.CheckClaim(header.client_id, header.num_examples, count);
  if (!s.ok()) return ToGrpcStatus(s);
  // A sender waits this long for the staging buffer; one that holds it and stalls is cut off
  // after the hub's stall timeout, so the wait is for live senders only.
  // A compressed update's header is checked before anything is staged for it.
  std::optional<UpdateDecoder> decoder;
  if (chunk.encoding() != v1::ModelChunk::F32 || chunk.segments_size() > 0 ||
      chunk.scales_size() > 0) {
    absl::StatusOr<UpdateDecoder> d = DecoderFor(chunk);
    if (!d.ok()) return ToGrpcStatus(d.status());
    // int8 scales each of the model's tensors: its segments must be the round's tensors.
    const std::vector<int64_t> expected = hub->RoundSegments();
    if (chunk.encoding() == v1::ModelChunk::INT8 && !expected.empty() &&
        !std::equal(expected.begin(), expected.end(), chunk.segments().begin(),
                    chunk.segments().end())) {
      return grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("int8 update: its ", chunk.segments_size(),
                       " segments are not the model's ", expected.size(), " tensors' sizes"));
    }
    decoder.emplace(*std::move(d));
  }
  s = hub->Begin(header, static_cast<size_t>(chunk.total_size()), count, absl::Seconds(600));
  if (!s.ok()) return ToGrpcStatus(s);
  SenderMetrics metrics{chunk.metrics().train_loss(), chunk.metrics().eval_loss(),
                        chunk.metrics().eval_accuracy(), chunk.metrics().eval_weight()};
  const int64_t rejected = chunk.metrics().rejected();
  absl::StatusOr<std::vector<std::pair<std::string, double>>> client_seconds =
      ClientSecondsOf(chunk.metrics(), header.client_id);
  if (!client_seconds.ok()) {
    hub->Abandon(header.client_id);
    return ToGrpcStatus(client_seconds.status());
  }
  std::vector<float> scratch;
  int64_t received = 0;
  bool more = true;
  while (more) {
    // Every chunk must carry the same experiment, round and client as the first.
    if (chunk.experiment_id() != header.experiment_id || chunk.round() != header.round ||
        chunk.client_id() != header.client_id) {
      hub->Abandon(header.client_id);
      return grpc::Status(grpc::StatusCode::ABORTED,
                          "chunk of another experiment, round or client");
    }
    if (decoder) {
      s = decoder->Decode(chunk.offset(), chunk.data(), &scratch);
      if (!s.ok()) {
        hub->Abandon(header.client_id);
        return ToGrpcStatus(s);
      }
      if (!scratch.empty()) {
        s = hub->AddChunk(header.client_id, chunk.offset(), scratch);
        if (!s.ok()) return ToGrpcStatus(s);
        received += static_cast<int64_t>(scratch.size());
      }
      more = read(&chunk);
      continue;
    }
    if (chunk.data().size() % sizeof(float) != 0) {
      hub->Abandon(header.client_id);
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("chunk at offset ", chunk.offset(), " holds ",
                                       chunk.data().size(), " bytes, not whole float32 values"));
    }
    if (!chunk.data().empty()) {
      absl::Span<const float> v = AsFloats(chunk.data(), scratch);
      s = hub->AddChunk(header.client_id, chunk.offset(), v);
      if (!s.ok()) return ToGrpcStatus(s);
      received += static_cast<int64_t>(v.size());
    }
    more = read(&chunk);
  }
  if (cancelled()) {
    // The sender died or gave up mid-stream: free the staging buffer; not a rejection.
    hub->Abandon(header.client_id);
    return grpc::Status(grpc::StatusCode::CANCELLED, "the update stream broke off");
  }
  s = hub->Finish(header.client_id, header.num_examples, count, metrics, rejected,
                  *std::move(client_seconds));
  if (!s.ok()) return ToGrpcStatus(s);
  gate.RecordClaim(header.client_id, header.num_examples);
  receipt->set_experiment_id(header.experiment_id);
  receipt->set_round(header.round);
  receipt->set_client_id(header.client_id);
  receipt->set_floats_received(received);
  return grpc::Status::OK;
}

grpc::Status FederationServiceImpl::PushUpdate(grpc::ServerContext* context,
                                               grpc::ServerReader<v1::ModelChunk>* reader,
                                               v1::UpdateReceipt* receipt) {
  return ReceiveUpdate(
      hub_, *gate_, CallerIdentity(*context), [&](v1::ModelChunk* c) { return reader->Read(c); },
      [&] { return context->IsCancelled(); }, receipt);
}

grpc::Status FederationServiceImpl::CheckSender(grpc::ServerContext* context,
                                                const std::string& sender_id) const {
  return ToGrpcStatus(gate_->CheckCaller(CallerIdentity(*context), sender_id));
}

grpc::Status FederationServiceImpl::SecAggAwait(grpc::ServerContext* context,
                                                const v1::SecAggPoll* request,
                                                v1::SecAggMessage* reply) {
  if (secagg_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "secure aggregation is off");
  }
  if (grpc::Status s = CheckSender(context, request->client_id()); !s.ok()) return s;
  if (request->stage() < 0 || request->stage() > static_cast<int32_t>(SecAggStage::kDone)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown secagg stage");
  }
  // NaN compares false both ways, so clamp() would pass it through as an endless wait.
  const double asked = request->wait_seconds();
  const double wait = asked >= 0 ? std::min(asked, 30.0) : 0.0;
  if (request->join_buffer()) {
    if (request->stage() != static_cast<int32_t>(SecAggStage::kAdvertiseKeys)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "a buffer's instance is joined at stage 0");
    }
    absl::StatusOr<SecAggDownlink> d = secagg_->Join(request->experiment_id(), request->client_id(),
                                                     request->round(), absl::Seconds(wait));
    if (!d.ok()) return ToGrpcStatus(d.status());
    // The answer names the instance the client was taken into.
    *reply = DownlinkToProto(*d, request->experiment_id(),
                             d->start ? d->start->config.round : request->round(),
                             request->client_id());
    return grpc::Status::OK;
  }
  absl::StatusOr<SecAggDownlink> d = secagg_->Await(request->experiment_id(), request->round(),
                                                    static_cast<SecAggStage>(request->stage()),
                                                    request->client_id(), absl::Seconds(wait));
  if (!d.ok()) return ToGrpcStatus(d.status());
  *reply = DownlinkToProto(*d, request->experiment_id(), request->round(), request->client_id());
  return grpc::Status::OK;
}

grpc::Status FederationServiceImpl::SecAggSubmit(grpc::ServerContext* context,
                                                 grpc::ServerReader<v1::SecAggMessage>* reader,
                                                 v1::SecAggReceipt* receipt) {
  if (secagg_ == nullptr) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "secure aggregation is off");
  }
  v1::SecAggMessage m;
  if (!reader->Read(&m)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "empty secagg stream");
  }
  if (grpc::Status s = CheckSender(context, m.client_id()); !s.ok()) return s;
  receipt->set_experiment_id(m.experiment_id());
  receipt->set_round(m.round());
  receipt->set_stage(m.stage());
  receipt->set_client_id(m.client_id());
  if (m.has_masked()) return SubmitMasked(context, m, reader);
  absl::Status s;
  if (m.has_keys() && (m.keys().certificate().size() > kMaxAttestationCertificateBytes ||
                       m.keys().signature().size() > kMaxAttestationSignatureBytes)) {
    secagg_->RecordRejection();
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("a key signature of at most ", kMaxAttestationSignatureBytes,
                                     " bytes and a certificate of at most ",
                                     kMaxAttestationCertificateBytes, " are allowed"));
  }
  if (m.has_keys()) {
    absl::StatusOr<SecAggAdvertiseKeys> k = KeysFromProto(m);
    // A sender with a certificate must sign its keys with it; that is checked here, so that one
    // bad signature is refused at once rather than by each neighbour (which would sink the
    // round). The neighbours check the relayed signature again themselves.
    std::function<absl::Status(int32_t)> check;
    const std::string caller_pem = CallerCertificate(*context);
    if (k.ok() && !caller_pem.empty() && CallerIdentity(*context)) {
      check = [&](int32_t index) {
        return CheckOwnAttestation(
            KeyAttestation{m.keys().certificate(), m.keys().signature()},
            KeyBinding(m.experiment_id(), m.round(), index, m.client_id(),
                       KeyBytes(k->encryption_key), KeyBytes(k->masking_key)),
            caller_pem);
      };
    }
    s = k.ok() ? secagg_->SubmitKeys(
                     m.client_id(), *std::move(k),
                     PeerAttestation{m.client_id(), m.keys().certificate(), m.keys().signature()},
                     check)
               : k.status();
  } else if (m.has_shares()) {
    absl::StatusOr<SecAggShareKeys> k = SharesFromProto(m);
    s = k.ok() ? secagg_->SubmitShares(m.client_id(), *std::move(k)) : k.status();
  } else if (m.has_unmask_response()) {
    absl::StatusOr<SecAggUnmaskResponse> k = RevealFromProto(m);
    s = k.ok() ? secagg_->SubmitReveal(m.client_id(), *std::move(k)) : k.status();
  } else {
    s = absl::InvalidArgumentError("a secagg message without a client body");
  }
  if (s.ok() && reader->Read(&m)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "one secagg message per call");
  }
  return ToGrpcStatus(s);
}

// The masked vector arrives in packed chunks and is assembled here (the hub checks its length
// before any chunk is stored, so a wrong-length vector is refused up front).
grpc::Status FederationServiceImpl::SubmitMasked(grpc::ServerContext* context, v1::SecAggMessage& m,
                                                 grpc::ServerReader<v1::SecAggMessage>* reader) {
  absl::StatusOr<SecAggHeader> header = HeaderFromProto(m);
  if (!header.ok()) return ToGrpcStatus(header.status());
  const std::string client = m.client_id();
  absl::StatusOr<SecAggConfig> config = secagg_->RoundConfig(m.experiment_id(), m.round(), client);
  if (!config.ok()) return ToGrpcStatus(config.status());
  const size_t* length = &config->vector_length;
  // The hub counts the rejections it makes; these are the stream's own (length, order, packing).
  auto reject = [&](grpc::StatusCode code, const std::string& message) {
    secagg_->RecordRejection();
    return grpc::Status(code, message);
  };
  if (m.masked().total_size() != static_cast<int64_t>(*length)) {
    return reject(grpc::StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("masked input of ", m.masked().total_size(),
                               " elements, the round's vectors have ", *length));
  }
  const v1::UpdateMetrics& um = m.masked().metrics();
  const SenderMetrics metrics{um.train_loss(), um.eval_loss(), um.eval_accuracy(),
                              um.eval_weight()};
  // A client stands for itself; a regional aggregator in the regions' round for its clients.
  const int64_t count = um.has_clients() ? um.clients() : 1;
  const int64_t rejected = um.rejected();
  // A region of the regions' round may stand for no client (zeros) up to its enrolled clients.
  if (count != 0 && gate_->policy().region.empty()) {
    if (absl::Status s = gate_->CheckClaim(client, 0, count); !s.ok()) return ToGrpcStatus(s);
  }
  // The vector is assembled in one of the hub's few staging buffers (files for a large model);
  // while they are all in use this stream waits, and gRPC's flow control holds its sender.
  const int ring_bits = config->ring_bits;
  const size_t word = RingVector::WordBytes(ring_bits);
  std::optional<StagingBuffer> staging;
  while (!staging) {
    absl::StatusOr<StagingBuffer> buffer =
        secagg_->TakeStaging(*length * word, absl::Milliseconds(200));
    if (buffer.ok()) {
      staging.emplace(*std::move(buffer));
    } else if (!absl::IsUnavailable(buffer.status()) || context->IsCancelled()) {
      return context->IsCancelled()
                 ? grpc::Status(grpc::StatusCode::CANCELLED, "the masked input stream broke off")
                 : ToGrpcStatus(buffer.status());
    }
  }
  absl::Cleanup give_back = [&] { secagg_->ReturnStaging(*std::move(staging)); };
  std::vector<uint64_t> values;
  std::vector<char> bytes;
  int64_t received = 0;
  do {
    if (m.experiment_id() != header->experiment_id || m.round() != header->round ||
        m.stage() != static_cast<int32_t>(header->stage) || m.client_id() != client ||
        !m.has_masked()) {
      return reject(grpc::StatusCode::ABORTED, "chunk of another experiment, round or client");
    }
    const v1::SecAggMaskedChunk& c = m.masked();
    if (c.offset() != received || c.count() < 0 ||
        c.count() > static_cast<int64_t>(*length) - received) {
      return reject(grpc::StatusCode::INVALID_ARGUMENT,
                    absl::StrCat("masked chunk at ", c.offset(), " of ", c.count(),
                                 " elements does not follow ", received, " of ", *length));
    }
    values.resize(static_cast<size_t>(c.count()));
    absl::Status unpacked = UnpackRingVectorInto(c.packed(), ring_bits, absl::MakeSpan(values));
    if (!unpacked.ok())
      return reject(grpc::StatusCode::INVALID_ARGUMENT, std::string(unpacked.message()));
    bytes.resize(values.size() * word);
    RingVector::ToBytes(ring_bits, values, bytes.data());
    if (absl::Status s = staging->Write(static_cast<size_t>(received) * word, bytes); !s.ok()) {
      return ToGrpcStatus(s);
    }
    received += c.count();
  } while (reader->Read(&m));
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the masked input stream broke off");
  }
  if (received != static_cast<int64_t>(*length)) {
    return reject(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("masked input ended after ", received, " of ", *length, " elements"));
  }
  // The hub adds the staged vector to the sum a chunk at a time.
  auto read = [&](size_t offset, absl::Span<uint64_t> out) -> absl::Status {
    bytes.resize(out.size() * word);
    SEXTANT_RETURN_IF_ERROR(staging->Read(offset * word, absl::MakeSpan(bytes)));
    RingVector::FromBytes(ring_bits, bytes.data(), out);
    return absl::OkStatus();
  };
  return ToGrpcStatus(secagg_->SubmitMasked(client, *header, read, metrics, count, rejected));
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartFederationServer(
    const std::string& listen, grpc::Service* service, int* port,
    std::shared_ptr<grpc::ServerCredentials> credentials, grpc::ResourceQuota* quota) {
  grpc::ServerBuilder builder;
  if (quota != nullptr) builder.SetResourceQuota(*quota);
  if (credentials == nullptr) credentials = grpc::InsecureServerCredentials();
  builder.AddListeningPort(listen, credentials, port);
  builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(8 << 20);
  builder.SetMaxSendMessageSize(8 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || *port == 0)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  return server;
}

absl::StatusOr<v1::JoinPlan> JoinUpstream(v1::FederationService::StubInterface* stub,
                                          const std::string& experiment_id,
                                          double deadline_seconds) {
  v1::JoinRequest request;
  request.set_experiment_id(experiment_id);
  v1::JoinPlan plan;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(deadline_seconds * 1000)));
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
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(static_cast<int64_t>(wait_seconds) + 600));
  std::unique_ptr<grpc::ClientReaderInterface<v1::ModelChunk>> reader =
      stub->GetRound(&context, request);
  v1::ModelChunk chunk;
  if (!reader->Read(&chunk)) return FromGrpcStatus(reader->Finish());
  if (chunk.assignment().segments_size() > kMaxUpdateSegments ||
      (chunk.assignment().segment_clips_size() != 0 &&
       chunk.assignment().segment_clips_size() != chunk.assignment().segments_size())) {
    context.TryCancel();
    return absl::InvalidArgumentError(absl::StrCat(
        "round assignment: ", chunk.assignment().segments_size(), " segments and ",
        chunk.assignment().segment_clips_size(), " ranges; ranges must be none or one per "
        "segment, at most ", kMaxUpdateSegments));
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
  chunk_values = std::max<int64_t>(chunk_values, 1);
  int64_t sent = 0;
  for (int64_t off = 0; off < d || off == 0; off += chunk_values) {
    const int64_t n = std::min(chunk_values, d - off);
    chunk.set_offset(off);
    chunk.set_data(bytes + off * width, n * width);
    sent += static_cast<int64_t>(chunk.ByteSizeLong());
    if (!writer->Write(chunk)) break;  // the server ended the call; Finish says why
    if (off == 0) {                    // header fields go with the first chunk only
      chunk.clear_total_size();
      chunk.clear_weight();
      chunk.clear_count();
      chunk.clear_metrics();
      chunk.clear_encoding();
      chunk.clear_segments();
      chunk.clear_scales();
    }
    if (d == 0) break;
  }
  writer->WritesDone();
  absl::Status s = FromGrpcStatus(writer->Finish());
  if (!s.ok()) return s;
  return sent;
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
