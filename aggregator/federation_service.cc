#include "aggregator/federation_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/match.h"
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
      return absl::InvalidArgumentError(
          absl::StrCat("client_seconds names '", c.client_id().substr(0, 64),
                       "': not a client of '", sender, "', or twice"));
    }
    if (!std::isfinite(c.seconds()) || c.seconds() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("client_seconds of '", c.client_id(), "' is ", c.seconds()));
    }
    out.emplace_back(c.client_id(), c.seconds());
  }
  return out;
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

// How long a long-poll may wait: `asked` seconds within [0, 30]. NaN compares false both ways,
// so clamp() would pass it through as an endless wait; it is 0, as negatives are.
absl::Duration LongPollWait(double asked) {
  return absl::Seconds(asked >= 0 ? std::min(asked, 30.0) : 0.0);
}

}  // namespace

RoundServing::RoundServing(FederationHub* hub, SenderGate* gate, std::optional<PeerIdentity> caller,
                           int64_t chunk_floats, v1::RoundRequest request)
    : hub_(hub),
      gate_(gate),
      caller_(std::move(caller)),
      chunk_floats_(std::max<int64_t>(chunk_floats, 1)),
      request_(std::move(request)) {}

absl::Status RoundServing::Check() const {
  return gate_->CheckCaller(caller_, request_.client_id());
}

absl::Duration RoundServing::wait() const { return LongPollWait(request_.wait_seconds()); }

absl::StatusOr<bool> RoundServing::Poll() {
  absl::StatusOr<RoundTask> task = hub_->WaitForRound(
      request_.experiment_id(), request_.client_id(), request_.round(), absl::ZeroDuration());
  if (!task.ok()) return task.status();
  task_ = *std::move(task);
  return task_.kind != RoundTask::Kind::kWait;
}

absl::StatusOr<bool> RoundServing::Next(v1::ModelChunk* out) {
  out->Clear();
  out->set_experiment_id(request_.experiment_id());
  out->set_client_id(request_.client_id());
  out->set_round(task_.round);
  if (next_offset_ < 0) {  // the assignment
    next_offset_ = 0;
    v1::RoundAssignment* a = out->mutable_assignment();
    a->set_kind(task_.kind == RoundTask::Kind::kTrain  ? v1::RoundAssignment::TRAIN
                : task_.kind == RoundTask::Kind::kDone ? v1::RoundAssignment::DONE
                                                       : v1::RoundAssignment::WAIT);
    if (task_.kind != RoundTask::Kind::kTrain) {
      next_offset_ = task_.model_size;  // nothing follows
      return true;
    }
    for (const std::string& p : task_.participants) a->add_participants(p);
    a->set_deadline_seconds(task_.deadline_seconds);
    a->set_model_size(task_.model_size);
    a->set_seed(task_.seed);
    a->set_min_updates(static_cast<int32_t>(task_.min_updates));
    a->set_quantizer_bits(task_.quantizer_bits);
    for (int64_t n : task_.segments) a->add_segments(n);
    for (double c : task_.segment_clips) a->add_segment_clips(c);
    return true;
  }
  if (next_offset_ >= task_.model_size) return false;
  const int64_t n = std::min(chunk_floats_, task_.model_size - next_offset_);
  buffer_.resize(static_cast<size_t>(n));
  SEXTANT_RETURN_IF_ERROR(hub_->ReadModel(task_.round, next_offset_, absl::MakeSpan(buffer_)));
  out->set_offset(next_offset_);
  out->set_data(reinterpret_cast<const char*>(buffer_.data()), n * sizeof(float));
  next_offset_ += n;
  return true;
}

UpdateReceiving::UpdateReceiving(FederationHub* hub, SenderGate* gate,
                                 std::optional<PeerIdentity> caller)
    : hub_(hub), gate_(gate), caller_(std::move(caller)) {}

absl::Status UpdateReceiving::Start(v1::ModelChunk first) {
  header_ = UpdateHeader{first.experiment_id(), first.round(), first.client_id(), first.weight()};
  count_ = std::max<int64_t>(first.count(), 1);
  if (first.total_size() < 0) return absl::InvalidArgumentError("total_size < 0");
  SEXTANT_RETURN_IF_ERROR(gate_->CheckCaller(caller_, header_.client_id));
  SEXTANT_RETURN_IF_ERROR(gate_->CheckClaim(header_.client_id, header_.num_examples, count_));
  // A compressed update's header is checked before anything is staged for it.
  if (first.encoding() != v1::ModelChunk::F32 || first.segments_size() > 0 ||
      first.scales_size() > 0) {
    absl::StatusOr<UpdateDecoder> d = DecoderFor(first);
    if (!d.ok()) return d.status();
    // int8 scales each of the model's tensors: its segments must be the round's tensors.
    const std::vector<int64_t> expected = hub_->RoundSegments();
    if (first.encoding() == v1::ModelChunk::INT8 && !expected.empty() &&
        !std::equal(expected.begin(), expected.end(), first.segments().begin(),
                    first.segments().end())) {
      return absl::InvalidArgumentError(absl::StrCat("int8 update: its ", first.segments_size(),
                                                     " segments are not the model's ",
                                                     expected.size(), " tensors' sizes"));
    }
    decoder_.emplace(*std::move(d));
  }
  metrics_ = SenderMetrics{first.metrics().train_loss(), first.metrics().eval_loss(),
                           first.metrics().eval_accuracy(), first.metrics().eval_weight()};
  rejected_ = first.metrics().rejected();
  absl::StatusOr<std::vector<std::pair<std::string, double>>> client_seconds =
      ClientSecondsOf(first.metrics(), header_.client_id);
  if (!client_seconds.ok()) return client_seconds.status();
  client_seconds_ = *std::move(client_seconds);
  first_ = std::move(first);
  return absl::OkStatus();
}

absl::StatusOr<bool> UpdateReceiving::TryBegin() {
  absl::Status s =
      hub_->Begin(header_, static_cast<size_t>(first_.total_size()), count_, absl::ZeroDuration());
  // Unavailable: another sender holds the staging buffer (or a buffered tier's buffer is
  // closed), unless the experiment has ended.
  if (absl::IsUnavailable(s) && !hub_->done()) return false;
  SEXTANT_RETURN_IF_ERROR(s);
  staging_ = true;
  SEXTANT_RETURN_IF_ERROR(Add(first_));
  first_.Clear();
  return true;
}

absl::Status UpdateReceiving::Add(const v1::ModelChunk& chunk) {
  // Every chunk must carry the same experiment, round and client as the first.
  if (chunk.experiment_id() != header_.experiment_id || chunk.round() != header_.round ||
      chunk.client_id() != header_.client_id) {
    Drop();
    return absl::AbortedError("chunk of another experiment, round or client");
  }
  absl::Span<const float> values;
  if (decoder_) {
    if (absl::Status s = decoder_->Decode(chunk.offset(), chunk.data(), &scratch_); !s.ok()) {
      Drop();
      return s;
    }
    values = scratch_;
  } else {
    if (chunk.data().size() % sizeof(float) != 0) {
      Drop();
      return absl::InvalidArgumentError(absl::StrCat("chunk at offset ", chunk.offset(), " holds ",
                                                     chunk.data().size(),
                                                     " bytes, not whole float32 values"));
    }
    values = AsFloats(chunk.data(), scratch_);
  }
  if (values.empty()) return absl::OkStatus();
  absl::Status s = hub_->AddChunk(header_.client_id, chunk.offset(), values);
  if (!s.ok()) {
    staging_ = false;  // the hub has let the buffer go
    return s;
  }
  received_ += static_cast<int64_t>(values.size());
  return absl::OkStatus();
}

absl::Status UpdateReceiving::End(bool cancelled, v1::UpdateReceipt* receipt) {
  if (cancelled) {
    // The sender died or gave up mid-stream: free the staging buffer; not a rejection.
    Drop();
    return absl::CancelledError("the update stream broke off");
  }
  staging_ = false;  // Finish folds the update or lets it go
  SEXTANT_RETURN_IF_ERROR(hub_->Finish(header_.client_id, header_.num_examples, count_, metrics_,
                                       rejected_, std::move(client_seconds_)));
  gate_->RecordClaim(header_.client_id, header_.num_examples);
  receipt->set_experiment_id(header_.experiment_id);
  receipt->set_round(header_.round);
  receipt->set_client_id(header_.client_id);
  receipt->set_floats_received(received_);
  return absl::OkStatus();
}

void UpdateReceiving::Drop() {
  if (staging_) hub_->Abandon(header_.client_id);
  staging_ = false;
}

namespace {

using Deadline = WaitList::Deadline;
Deadline SteadyAfter(absl::Duration d) {
  return std::chrono::steady_clock::now() + absl::ToChronoNanoseconds(d);
}
// A parked call looks again at least this often, so that nothing waits on a wake-up alone.
constexpr absl::Duration kRecheck = absl::Seconds(1);

// What each of the service's reactors shares: its quota ticket, ending exactly once whichever
// of its events gets there first, and parking on a hub's WaitList between tries while it
// waits. A parked call that is cancelled ends at once. The reactor owns itself (self_) until
// gRPC is done with it; a parked continuation keeps it alive until it has run.
template <class Reactor>
class ServiceCall : public Reactor {
 public:
  // Starts a call made with make_shared; returns what the RPC method returns.
  template <class Call>
  static Call* Launch(std::shared_ptr<Call> call, TransferMeter* meter) {
    ServiceCall* base = call.get();
    base->meter_ = meter;
    base->self_ = std::move(call);
    base->Start();
    return static_cast<Call*>(base);
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
      if (!parked_ || finished_) return;  // an operation in flight fails and ends the call
      finished_ = true;
    }
    this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while it waited"));
  }
  void OnDone() override {
    Release();
    ticket_ = CallQuota::Ticket();
    self_.reset();  // the last reference, unless a continuation still holds one
  }

 protected:
  ServiceCall(grpc::CallbackServerContext* context, CallQuota* quota)
      : context_(context), quota_(quota) {}

  // Counts a message written to (sent) or read from the sender `id`, whom the gate accepted.
  void Count(const std::string& id, const google::protobuf::MessageLite& m, bool sent) {
    if (meter_ == nullptr) return;
    const auto bytes = static_cast<int64_t>(m.ByteSizeLong());
    if (sent) {
      meter_->Sent(id, bytes);
    } else {
      meter_->Received(id, bytes);
    }
  }

  // The call's first step, from the RPC method.
  virtual void Start() = 0;
  // The next try after a wake-up.
  virtual void Resume() = 0;
  // Gives back what the call holds in a hub; from OnDone, while the hubs are there.
  virtual void Release() {}

  // Takes the caller's place in the quota; false (and the call ends RESOURCE_EXHAUSTED) when
  // there is none.
  bool Admit() {
    absl::StatusOr<CallQuota::Ticket> ticket = quota_->Admit(CallerIdentity(*context_));
    if (!ticket.ok()) {
      End(ToGrpcStatus(ticket.status()));
      return false;
    }
    ticket_ = *std::move(ticket);
    return true;
  }

  // Keeps `bytes` of the message the call waits with, within the quota's bound in all
  // (CallLimits::max_held_bytes), until the call's place is given back. Once per call: later
  // waits of the same call keep the same message.
  absl::Status KeepWhileWaiting(int64_t bytes) {
    if (kept_) return absl::OkStatus();
    SEXTANT_RETURN_IF_ERROR(ticket_.Hold(bytes));
    kept_ = true;
    return absl::OkStatus();
  }

  // Ends the call with s, unless it has ended.
  void End(const absl::Status& s) { End(ToGrpcStatus(s)); }
  void End(grpc::Status s) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    this->Finish(std::move(s));
  }

  // Resume() runs once `list` moves past `seen` or at `until`; ends the call if it has been
  // cancelled meanwhile.
  void Park(WaitList& list, uint64_t seen, Deadline until) {
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_ && !finished_) {
        parked_ = true;
        list.Park(seen, until, [self = self_] { self->Unpark(); });
        return;
      }
    }
    End(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while it waited"));
  }

  grpc::CallbackServerContext* context_;

 private:
  void Unpark() {
    {
      absl::MutexLock lock(&mu_);
      parked_ = false;
      if (finished_) return;
    }
    Resume();
  }

  CallQuota* quota_;
  CallQuota::Ticket ticket_;
  bool kept_ = false;  // KeepWhileWaiting's bytes are held
  std::shared_ptr<ServiceCall> self_;
  absl::Mutex mu_;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool parked_ ABSL_GUARDED_BY(mu_) = false;
  TransferMeter* meter_ = nullptr;  // set by Launch; null: nothing counted
};

// GetRound: parked until the caller's round is published or its wait is over, then the
// assignment and the model, one chunk per write.
class RoundCall final : public ServiceCall<grpc::ServerWriteReactor<v1::ModelChunk>> {
 public:
  RoundCall(grpc::CallbackServerContext* context, CallQuota* quota, FederationHub* hub,
            SenderGate* gate, int64_t chunk_floats, const v1::RoundRequest& request)
      : ServiceCall(context, quota),
        hub_(hub),
        serving_(hub, gate, CallerIdentity(*context), chunk_floats, request),
        client_id_(request.client_id()) {}

  void OnWriteDone(bool ok) override {
    if (!ok) return End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "client went away"));
    WriteNext();
  }

 private:
  void Start() override {
    if (!Admit()) return;
    if (absl::Status s = serving_.Check(); !s.ok()) return End(s);
    until_ = SteadyAfter(serving_.wait());
    Resume();
  }
  void Resume() override {
    const uint64_t seen = hub_->waiters().Version();
    absl::StatusOr<bool> decided = serving_.Poll();
    if (!decided.ok()) return End(decided.status());
    if (!*decided && std::chrono::steady_clock::now() < until_) {
      return Park(hub_->waiters(), seen, std::min(until_, SteadyAfter(kRecheck)));
    }
    WriteNext();
  }
  void WriteNext() {
    absl::StatusOr<bool> more = serving_.Next(&message_);
    if (!more.ok()) return End(more.status());
    if (!*more) return End(grpc::Status::OK);
    Count(client_id_, message_, /*sent=*/true);
    StartWrite(&message_);
  }

  FederationHub* hub_;
  RoundServing serving_;
  const std::string client_id_;
  Deadline until_;
  v1::ModelChunk message_;
};

// PushUpdate: the header checked, then parked while another sender holds the hub's staging
// buffer (its flow control holds this sender meanwhile), then each chunk staged as it is read.
class UpdateCall final : public ServiceCall<grpc::ServerReadReactor<v1::ModelChunk>> {
 public:
  UpdateCall(grpc::CallbackServerContext* context, CallQuota* quota, FederationHub* hub,
             SenderGate* gate, v1::UpdateReceipt* receipt)
      : ServiceCall(context, quota),
        hub_(hub),
        receiving_(hub, gate, CallerIdentity(*context)),
        receipt_(receipt) {}

  void OnReadDone(bool ok) override {
    if (!started_) {
      if (!ok) return End(absl::InvalidArgumentError("empty update stream"));
      started_ = true;
      first_bytes_ = static_cast<int64_t>(chunk_.ByteSizeLong());
      sender_ = chunk_.client_id();
      Count(sender_, chunk_, /*sent=*/false);
      if (absl::Status s = receiving_.Start(std::move(chunk_)); !s.ok()) return End(s);
      // A sender waits this long for the staging buffer; one that holds it and stalls is cut
      // off after the hub's stall timeout, so the wait is for live senders only.
      until_ = SteadyAfter(absl::Seconds(600));
      return Resume();
    }
    if (!ok) return End(receiving_.End(context_->IsCancelled(), receipt_));
    Count(sender_, chunk_, /*sent=*/false);
    if (absl::Status s = receiving_.Add(chunk_); !s.ok()) return End(s);
    StartRead(&chunk_);
  }

 private:
  void Start() override {
    if (Admit()) StartRead(&chunk_);
  }
  void Resume() override {
    const uint64_t seen = hub_->waiters().Version();
    absl::StatusOr<bool> begun = receiving_.TryBegin();
    if (!begun.ok()) return End(begun.status());
    if (*begun) return StartRead(&chunk_);
    if (std::chrono::steady_clock::now() >= until_) {
      return End(absl::UnavailableError("the staging buffer stayed busy"));
    }
    // The first chunk waits with the call: within the bytes all waiting calls may keep.
    if (absl::Status s = KeepWhileWaiting(first_bytes_); !s.ok()) return End(s);
    // The hub cuts a stalled holder off by its own clock: look again soon.
    Park(hub_->waiters(), seen, std::min(until_, SteadyAfter(absl::Milliseconds(100))));
  }
  void Release() override { receiving_.Drop(); }

  FederationHub* hub_;
  UpdateReceiving receiving_;
  v1::UpdateReceipt* receipt_;
  bool started_ = false;
  std::string sender_;  // the first chunk's client id
  int64_t first_bytes_ = 0;
  Deadline until_;
  v1::ModelChunk chunk_;
};

// SecAggAwait: parked until the asked stage opens for the caller (or, joining a buffer, until
// it is taken into an instance) or its wait is over.
class SecAggAwaitCall final : public ServiceCall<grpc::ServerUnaryReactor> {
 public:
  SecAggAwaitCall(grpc::CallbackServerContext* context, CallQuota* quota, SecAggHub* secagg,
                  SenderGate* gate, const v1::SecAggPoll* request, v1::SecAggMessage* reply)
      : ServiceCall(context, quota),
        secagg_(secagg),
        gate_(gate),
        request_(*request),
        reply_(reply) {}

 private:
  void Start() override {
    if (!Admit()) return;
    if (secagg_ == nullptr) {
      return End(absl::FailedPreconditionError("secure aggregation is off"));
    }
    if (absl::Status s = gate_->CheckCaller(CallerIdentity(*context_), request_.client_id());
        !s.ok()) {
      return End(s);
    }
    if (request_.stage() < 0 || request_.stage() > static_cast<int32_t>(SecAggStage::kDone)) {
      return End(absl::InvalidArgumentError("unknown secagg stage"));
    }
    if (request_.join_buffer() &&
        request_.stage() != static_cast<int32_t>(SecAggStage::kAdvertiseKeys)) {
      return End(absl::InvalidArgumentError("a buffer's instance is joined at stage 0"));
    }
    until_ = SteadyAfter(LongPollWait(request_.wait_seconds()));
    Resume();
  }
  void Resume() override {
    const uint64_t seen = secagg_->waiters().Version();
    // Each try keeps a joining client's place in line fresh (SecAggHub::Join).
    absl::StatusOr<SecAggDownlink> d =
        request_.join_buffer() ? secagg_->Join(request_.experiment_id(), request_.client_id(),
                                               request_.round(), absl::ZeroDuration())
                               : secagg_->Await(request_.experiment_id(), request_.round(),
                                                static_cast<SecAggStage>(request_.stage()),
                                                request_.client_id(), absl::ZeroDuration());
    if (!d.ok()) return End(d.status());
    if (d->pending && std::chrono::steady_clock::now() < until_) {
      // A joining client stays in line while its call waits parked, not only while it asks.
      if (request_.join_buffer() && !holding_) {
        secagg_->HoldJoin(request_.client_id(), +1);
        holding_ = true;
      }
      return Park(secagg_->waiters(), seen, std::min(until_, SteadyAfter(kRecheck)));
    }
    // A joined buffer's answer names the instance the client was taken into.
    const int64_t round =
        request_.join_buffer() && d->start ? d->start->config.round : request_.round();
    *reply_ = DownlinkToProto(*d, request_.experiment_id(), round, request_.client_id());
    Count(request_.client_id(), *reply_, /*sent=*/true);
    End(grpc::Status::OK);
  }

  void Release() override {
    if (holding_) secagg_->HoldJoin(request_.client_id(), -1);
    holding_ = false;
  }

  SecAggHub* secagg_;
  SenderGate* gate_;
  const v1::SecAggPoll request_;
  v1::SecAggMessage* reply_;
  Deadline until_;
  bool holding_ = false;  // HoldJoin taken
};

// SecAggSubmit: one client message. A masked input arrives in packed chunks and is assembled in
// one of the hub's few staging buffers (files for a large model), parked while they are all in
// use (gRPC's flow control holds its sender meanwhile); the hub checks its length before any
// chunk is stored.
class SecAggSubmitCall final : public ServiceCall<grpc::ServerReadReactor<v1::SecAggMessage>> {
 public:
  SecAggSubmitCall(grpc::CallbackServerContext* context, CallQuota* quota, SecAggHub* secagg,
                   SenderGate* gate, v1::SecAggReceipt* receipt)
      : ServiceCall(context, quota), secagg_(secagg), gate_(gate), receipt_(receipt) {}

  void OnReadDone(bool ok) override {
    switch (phase_) {
      case Phase::kFirst:
        if (!ok) return End(absl::InvalidArgumentError("empty secagg stream"));
        return First();
      case Phase::kTrailing:  // a message besides the first
        if (ok) return End(absl::InvalidArgumentError("one secagg message per call"));
        return End(grpc::Status::OK);
      case Phase::kMasked:
        if (!ok) return EndMasked();
        Count(client_, m_, /*sent=*/false);
        if (absl::Status s = AddMasked(); !s.ok()) return End(s);
        return StartRead(&m_);
    }
  }

 private:
  enum class Phase { kFirst, kTrailing, kMasked };

  void Start() override {
    if (!Admit()) return;
    if (secagg_ == nullptr) {
      return End(absl::FailedPreconditionError("secure aggregation is off"));
    }
    StartRead(&m_);
  }

  void First() {
    if (absl::Status s = gate_->CheckCaller(CallerIdentity(*context_), m_.client_id()); !s.ok()) {
      return End(s);
    }
    Count(m_.client_id(), m_, /*sent=*/false);
    receipt_->set_experiment_id(m_.experiment_id());
    receipt_->set_round(m_.round());
    receipt_->set_stage(m_.stage());
    receipt_->set_client_id(m_.client_id());
    if (m_.has_masked()) return BeginMasked();
    if (absl::Status s = SubmitOne(); !s.ok()) return End(s);
    phase_ = Phase::kTrailing;
    StartRead(&m_);
  }

  absl::Status SubmitOne() {
    const v1::SecAggMessage& m = m_;
    if (m.has_keys() && (m.keys().certificate().size() > kMaxAttestationCertificateBytes ||
                         m.keys().signature().size() > kMaxAttestationSignatureBytes)) {
      secagg_->RecordRejection();
      return absl::InvalidArgumentError(absl::StrCat(
          "a key signature of at most ", kMaxAttestationSignatureBytes,
          " bytes and a certificate of at most ", kMaxAttestationCertificateBytes, " are allowed"));
    }
    if (m.has_keys()) {
      SEXTANT_ASSIGN_OR_RETURN(SecAggAdvertiseKeys k, KeysFromProto(m));
      // A sender with a certificate must sign its keys with it; that is checked here, so that
      // one bad signature is refused at once rather than by each neighbour (which would sink
      // the round). The neighbours check the relayed signature again themselves.
      std::function<absl::Status(int32_t)> check;
      const std::string caller_pem = CallerCertificate(*context_);
      if (!caller_pem.empty() && CallerIdentity(*context_)) {
        check = [&](int32_t index) {
          return CheckOwnAttestation(
              KeyAttestation{m.keys().certificate(), m.keys().signature()},
              KeyBinding(m.experiment_id(), m.round(), index, m.client_id(),
                         KeyBytes(k.encryption_key), KeyBytes(k.masking_key)),
              caller_pem);
        };
      }
      return secagg_->SubmitKeys(
          m.client_id(), std::move(k),
          PeerAttestation{m.client_id(), m.keys().certificate(), m.keys().signature()}, check);
    }
    if (m.has_shares()) {
      SEXTANT_ASSIGN_OR_RETURN(SecAggShareKeys k, SharesFromProto(m));
      return secagg_->SubmitShares(m.client_id(), std::move(k));
    }
    if (m.has_unmask_response()) {
      SEXTANT_ASSIGN_OR_RETURN(SecAggUnmaskResponse k, RevealFromProto(m));
      return secagg_->SubmitReveal(m.client_id(), std::move(k));
    }
    return absl::InvalidArgumentError("a secagg message without a client body");
  }

  // The hub counts the rejections it makes; these are the stream's own (length, order,
  // packing).
  absl::Status Reject(absl::Status s) {
    secagg_->RecordRejection();
    return s;
  }

  void BeginMasked() {
    absl::StatusOr<SecAggHeader> header = HeaderFromProto(m_);
    if (!header.ok()) return End(header.status());
    header_ = *header;
    client_ = m_.client_id();
    absl::StatusOr<SecAggConfig> config =
        secagg_->RoundConfig(m_.experiment_id(), m_.round(), client_);
    if (!config.ok()) return End(config.status());
    length_ = config->vector_length;
    ring_bits_ = config->ring_bits;
    if (m_.masked().total_size() != static_cast<int64_t>(length_)) {
      return End(Reject(absl::InvalidArgumentError(
          absl::StrCat("masked input of ", m_.masked().total_size(),
                       " elements, the round's vectors have ", length_))));
    }
    const v1::UpdateMetrics& um = m_.masked().metrics();
    metrics_ = SenderMetrics{um.train_loss(), um.eval_loss(), um.eval_accuracy(), um.eval_weight()};
    // A client stands for itself; a regional aggregator in the regions' round for its clients.
    count_ = um.has_clients() ? um.clients() : 1;
    rejected_ = um.rejected();
    // A region of the regions' round may stand for no client (zeros) up to its enrolled
    // clients.
    if (count_ != 0 && gate_->policy().region.empty()) {
      if (absl::Status s = gate_->CheckClaim(client_, 0, count_); !s.ok()) return End(s);
    }
    phase_ = Phase::kMasked;
    Resume();
  }

  // Waits for a staging buffer, then takes the first chunk.
  void Resume() override {
    const uint64_t seen = secagg_->waiters().Version();
    const size_t word = RingVector::WordBytes(ring_bits_);
    absl::StatusOr<StagingBuffer> buffer =
        secagg_->TakeStaging(length_ * word, absl::ZeroDuration());
    if (absl::IsUnavailable(buffer.status())) {
      // The first chunk waits with the call: within the bytes all waiting calls may keep.
      if (absl::Status s = KeepWhileWaiting(static_cast<int64_t>(m_.ByteSizeLong())); !s.ok()) {
        return End(s);
      }
      return Park(secagg_->waiters(), seen, SteadyAfter(absl::Milliseconds(200)));
    }
    if (!buffer.ok()) return End(buffer.status());
    staging_.emplace(*std::move(buffer));
    if (absl::Status s = AddMasked(); !s.ok()) return End(s);
    StartRead(&m_);
  }

  absl::Status AddMasked() {
    if (m_.experiment_id() != header_.experiment_id || m_.round() != header_.round ||
        m_.stage() != static_cast<int32_t>(header_.stage) || m_.client_id() != client_ ||
        !m_.has_masked()) {
      return Reject(absl::AbortedError("chunk of another experiment, round or client"));
    }
    const v1::SecAggMaskedChunk& c = m_.masked();
    if (c.offset() != received_ || c.count() < 0 ||
        c.count() > static_cast<int64_t>(length_) - received_) {
      return Reject(absl::InvalidArgumentError(absl::StrCat("masked chunk at ", c.offset(), " of ",
                                                            c.count(), " elements does not follow ",
                                                            received_, " of ", length_)));
    }
    values_.resize(static_cast<size_t>(c.count()));
    if (absl::Status s = UnpackRingVectorInto(c.packed(), ring_bits_, absl::MakeSpan(values_));
        !s.ok()) {
      return Reject(absl::InvalidArgumentError(s.message()));
    }
    const size_t word = RingVector::WordBytes(ring_bits_);
    bytes_.resize(values_.size() * word);
    RingVector::ToBytes(ring_bits_, values_, bytes_.data());
    SEXTANT_RETURN_IF_ERROR(staging_->Write(static_cast<size_t>(received_) * word, bytes_));
    received_ += c.count();
    return absl::OkStatus();
  }

  void EndMasked() {
    if (context_->IsCancelled()) {
      return End(absl::CancelledError("the masked input stream broke off"));
    }
    if (received_ != static_cast<int64_t>(length_)) {
      return End(Reject(absl::InvalidArgumentError(
          absl::StrCat("masked input ended after ", received_, " of ", length_, " elements"))));
    }
    // The hub adds the staged vector to the sum a chunk at a time.
    const size_t word = RingVector::WordBytes(ring_bits_);
    auto read = [&](size_t offset, absl::Span<uint64_t> out) -> absl::Status {
      bytes_.resize(out.size() * word);
      SEXTANT_RETURN_IF_ERROR(staging_->Read(offset * word, absl::MakeSpan(bytes_)));
      RingVector::FromBytes(ring_bits_, bytes_.data(), out);
      return absl::OkStatus();
    };
    End(secagg_->SubmitMasked(client_, header_, read, metrics_, count_, rejected_));
  }

  void Release() override {
    if (staging_) secagg_->ReturnStaging(*std::move(staging_));
    staging_.reset();
  }

  SecAggHub* secagg_;
  SenderGate* gate_;
  v1::SecAggReceipt* receipt_;
  Phase phase_ = Phase::kFirst;
  v1::SecAggMessage m_;
  // The masked input's.
  SecAggHeader header_;
  std::string client_;
  size_t length_ = 0;
  int ring_bits_ = 0;
  SenderMetrics metrics_;
  int64_t count_ = 1;
  int64_t rejected_ = 0;
  std::optional<StagingBuffer> staging_;
  int64_t received_ = 0;
  std::vector<uint64_t> values_;
  std::vector<char> bytes_;
};

}  // namespace

FederationServiceImpl::FederationServiceImpl(FederationHub* hub, int64_t chunk_floats,
                                             SecAggHub* secagg, SenderGate* gate, CallLimits limits)
    : hub_(hub),
      chunk_floats_(chunk_floats),
      secagg_(secagg),
      gate_(gate != nullptr ? gate : &own_gate_),
      quota_(limits) {}

grpc::ServerUnaryReactor* FederationServiceImpl::Join(grpc::CallbackServerContext* context,
                                                      const v1::JoinRequest* request,
                                                      v1::JoinPlan* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Answered at once, so its place in the quota is given back as soon as it is taken.
  absl::StatusOr<CallQuota::Ticket> ticket = quota_.Admit(CallerIdentity(*context));
  reactor->Finish(ticket.ok() ? JoinPlanFor(*context, *request, reply)
                              : ToGrpcStatus(ticket.status()));
  return reactor;
}

grpc::Status FederationServiceImpl::JoinPlanFor(const grpc::CallbackServerContext& context,
                                                const v1::JoinRequest& request,
                                                v1::JoinPlan* reply) {
  const std::optional<PeerIdentity> caller = CallerIdentity(context);
  if (!caller) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "joining takes a certificate identity (sextant certs issue, --tls-dir)");
  }
  if (!join_) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this server starts its participants itself: none joins by hand");
  }
  if (!request.experiment_id().empty() && request.experiment_id() != hub_->experiment_id()) {
    return grpc::Status(grpc::StatusCode::ABORTED, "another experiment is served here");
  }
  if (!request.pool().empty()) {
    if (absl::Status s = CheckId("pool", request.pool()); !s.ok()) return ToGrpcStatus(s);
  }
  absl::StatusOr<v1::JoinPlan> plan = join_(*caller, request.pool());
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  *reply = *std::move(plan);
  reply->set_experiment_id(hub_->experiment_id());
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* FederationServiceImpl::ReportJoin(grpc::CallbackServerContext* context,
                                                            const v1::JoinedClient* request,
                                                            v1::JoinedReceipt*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<CallQuota::Ticket> ticket = quota_.Admit(CallerIdentity(*context));
  if (!ticket.ok()) {
    reactor->Finish(ToGrpcStatus(ticket.status()));
    return reactor;
  }
  const std::optional<PeerIdentity> caller = CallerIdentity(*context);
  absl::Status s;
  if (!caller) {
    s = absl::PermissionDeniedError("reporting a join takes a certificate identity");
  } else if (!join_report_) {
    s = absl::FailedPreconditionError("this server starts its participants itself: none joins by hand");
  } else if (request->experiment_id() != hub_->experiment_id()) {
    s = absl::AbortedError("another experiment is served here");
  } else if (s = CheckClientId("client_id", request->client_id()); s.ok()) {
    s = CheckId("pool", request->pool());
    if (s.ok()) s = join_report_(*caller, request->client_id(), request->pool());
  }
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

grpc::ServerUnaryReactor* FederationServiceImpl::ReportFailure(
    grpc::CallbackServerContext* context, const v1::ParticipantFailure* request,
    v1::FailureReceipt*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<CallQuota::Ticket> ticket = quota_.Admit(CallerIdentity(*context));
  reactor->Finish(ticket.ok() ? RecordFailure(*context, *request) : ToGrpcStatus(ticket.status()));
  return reactor;
}

grpc::Status FederationServiceImpl::RecordFailure(const grpc::CallbackServerContext& context,
                                                  const v1::ParticipantFailure& request) {
  if (request.error().size() > kMaxFailureErrorBytes) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "error is ", request.error().size(), " bytes; at most ", kMaxFailureErrorBytes)));
  }
  const std::optional<PeerIdentity> caller = CallerIdentity(context);
  if (absl::Status s = gate_->CheckCaller(caller, request.client_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  // A client speaks for itself; an aggregator (at the global tier) also for its own clients,
  // whose ids the hub checks against the round's tasks.
  const bool relayed = gate_->policy().region.empty() &&
                       absl::StartsWith(request.failed(), request.client_id() + "/") &&
                       request.failed().size() <= request.client_id().size() + 1 + 128;
  if (request.failed() != request.client_id() && !relayed) {
    return ToGrpcStatus(absl::PermissionDeniedError(absl::StrCat(
        request.client_id(), " may not report ", request.failed().substr(0, 128), " failed")));
  }
  absl::Status recorded =
      hub_->RecordFailure(request.experiment_id(), request.round(), request.client_id(),
                          request.failed(), request.error());
  // A region's client that failed (its training, or a stage it refused) sends nothing more: its
  // SecAgg round goes on without it at once. (At the global tier a failed region still takes part,
  // with zeros.)
  if (recorded.ok() && secagg_ != nullptr && !relayed && !gate_->policy().region.empty()) {
    secagg_->Withdraw(request.experiment_id(), request.round(), request.client_id());
  }
  return ToGrpcStatus(recorded);
}

grpc::ServerWriteReactor<v1::ModelChunk>* FederationServiceImpl::GetRound(
    grpc::CallbackServerContext* context, const v1::RoundRequest* request) {
  return RoundCall::Launch(
      std::make_shared<RoundCall>(context, &quota_, hub_, gate_, chunk_floats_, *request), meter_);
}

grpc::ServerReadReactor<v1::ModelChunk>* FederationServiceImpl::PushUpdate(
    grpc::CallbackServerContext* context, v1::UpdateReceipt* receipt) {
  return UpdateCall::Launch(std::make_shared<UpdateCall>(context, &quota_, hub_, gate_, receipt),
                            meter_);
}

grpc::ServerUnaryReactor* FederationServiceImpl::SecAggAwait(grpc::CallbackServerContext* context,
                                                             const v1::SecAggPoll* request,
                                                             v1::SecAggMessage* reply) {
  return SecAggAwaitCall::Launch(
      std::make_shared<SecAggAwaitCall>(context, &quota_, secagg_, gate_, request, reply), meter_);
}

grpc::ServerReadReactor<v1::SecAggMessage>* FederationServiceImpl::SecAggSubmit(
    grpc::CallbackServerContext* context, v1::SecAggReceipt* receipt) {
  return SecAggSubmitCall::Launch(
      std::make_shared<SecAggSubmitCall>(context, &quota_, secagg_, gate_, receipt), meter_);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> StartFederationServer(
    const std::string& listen, grpc::Service* service, int* port,
    std::shared_ptr<grpc::ServerCredentials> credentials, grpc::ResourceQuota* quota,
    const ServerInterceptors& interceptors) {
  grpc::ServerBuilder builder;
  if (interceptors) builder.experimental().SetInterceptorCreators(interceptors());
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

}  // namespace sextant
