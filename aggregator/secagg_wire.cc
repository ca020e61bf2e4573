#include "aggregator/secagg_wire.h"

#include "rpc/status_conversion.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include "absl/strings/str_cat.h"
#include "aggregator/chunked_stream.h"
#include "federation/update_codec.h"

namespace sextant {
namespace {

template <size_t N>
absl::Status CopyBytes(const std::string& from, std::array<uint8_t, N>& to, const char* what) {
  if (from.size() != N) {
    return absl::InvalidArgumentError(
        absl::StrCat("secagg: ", what, " has ", from.size(), " bytes, expected ", N));
  }
  std::memcpy(to.data(), from.data(), N);
  return absl::OkStatus();
}

template <size_t N>
std::string Bytes(const std::array<uint8_t, N>& a) {
  return std::string(reinterpret_cast<const char*>(a.data()), N);
}

}  // namespace

std::string KeyBytes(const SecAggPublicKey& key) { return Bytes(key); }

namespace {

void SetHeader(v1::SecAggMessage* out, const SecAggHeader& h, const std::string& client_id) {
  out->set_experiment_id(h.experiment_id);
  out->set_round(h.round);
  out->set_stage(static_cast<int32_t>(h.stage));
  out->set_client_id(client_id);
}

void SharesTo(const std::vector<SecAggEncryptedShare>& shares, v1::SecAggShares* out) {
  for (const SecAggEncryptedShare& s : shares) {
    v1::SecAggCiphertext* c = out->add_shares();
    c->set_sender(s.sender);
    c->set_recipient(s.recipient);
    c->set_nonce(Bytes(s.nonce));
    c->set_ciphertext(std::string(s.ciphertext.begin(), s.ciphertext.end()));
  }
}

absl::Status SharesFrom(const v1::SecAggShares& in, std::vector<SecAggEncryptedShare>* out) {
  for (const v1::SecAggCiphertext& c : in.shares()) {
    SecAggEncryptedShare s;
    s.sender = c.sender();
    s.recipient = c.recipient();
    if (absl::Status st = CopyBytes(c.nonce(), s.nonce, "nonce"); !st.ok()) return st;
    s.ciphertext.assign(c.ciphertext().begin(), c.ciphertext().end());
    out->push_back(std::move(s));
  }
  return absl::OkStatus();
}

absl::Status WrongBody(const v1::SecAggMessage& m, const char* want) {
  return absl::InvalidArgumentError(absl::StrCat("secagg: expected ", want, " in a message of the ",
                                                 "stage ", m.stage(), " from ", m.client_id()));
}

}  // namespace

absl::StatusOr<SecAggHeader> HeaderFromProto(const v1::SecAggMessage& m) {
  if (m.stage() < 0 || m.stage() > static_cast<int32_t>(SecAggStage::kAborted)) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: unknown stage ", m.stage()));
  }
  SecAggHeader h;
  h.experiment_id = m.experiment_id();
  h.round = m.round();
  h.stage = static_cast<SecAggStage>(m.stage());
  return h;
}

v1::SecAggMessage DownlinkToProto(const SecAggDownlink& d, const std::string& experiment_id,
                                  int64_t round, const std::string& client_id) {
  v1::SecAggMessage out;
  out.set_experiment_id(experiment_id);
  out.set_round(round);
  out.set_stage(static_cast<int32_t>(d.stage));
  out.set_client_id(client_id);
  out.set_pending(d.pending);
  if (d.start) {
    const SecAggConfig& c = d.start->config;
    v1::SecAggRoundConfig* p = out.mutable_config();
    p->set_num_clients(c.num_clients);
    p->set_degree(c.degree);
    p->set_threshold(c.threshold);
    p->set_ring_bits(c.ring_bits);
    p->set_vector_length(static_cast<int64_t>(c.vector_length));
    p->set_graph_seed(c.graph_seed);
    p->set_client_index(d.start->client_index);
    p->set_clip(d.start->quantization.clip);
    p->set_quantizer_bits(d.start->quantization.bits);
    p->set_max_weight(d.start->quantization.max_weight);
    for (int64_t n : d.start->quantization.segments) p->add_segments(n);
    for (double c : d.start->quantization.segment_clips) p->add_segment_clips(c);
    if (d.start->update_scale != 1) p->set_update_scale(d.start->update_scale);
  } else if (d.directory) {
    for (size_t i = 0; i < d.directory->peers.size(); ++i) {
      const SecAggPeerKeys& k = d.directory->peers[i];
      v1::SecAggPeer* p = out.mutable_directory()->add_peers();
      p->set_client(k.client);
      p->set_encryption_key(Bytes(k.encryption_key));
      p->set_masking_key(Bytes(k.masking_key));
      if (i < d.attestations.size()) {
        p->set_client_id(d.attestations[i].client_id);
        p->set_signature(d.attestations[i].signature);
        p->set_certificate(d.attestations[i].certificate_pem);
      }
    }
  } else if (d.delivery) {
    SharesTo(d.delivery->shares, out.mutable_shares());
  } else if (d.unmask_request) {
    v1::SecAggUnmaskList* u = out.mutable_unmask_request();
    for (int32_t s : d.unmask_request->survivors) u->add_survivors(s);
    for (int32_t s : d.unmask_request->dropped) u->add_dropped(s);
  }
  return out;
}

// The server's messages carry its view of the header: this client is the recipient.
absl::StatusOr<SecAggDownlink> DownlinkFromProto(const v1::SecAggMessage& m) {
  absl::StatusOr<SecAggHeader> h = HeaderFromProto(m);
  if (!h.ok()) return h.status();
  SecAggDownlink d;
  d.stage = h->stage;
  d.pending = m.pending();
  switch (m.body_case()) {
    case v1::SecAggMessage::kConfig: {
      const v1::SecAggRoundConfig& p = m.config();
      SecAggRoundStart s;
      s.config = {m.experiment_id(),
                  m.round(),
                  p.num_clients(),
                  p.degree(),
                  p.threshold(),
                  p.ring_bits(),
                  static_cast<size_t>(std::max<int64_t>(p.vector_length(), 0)),
                  p.graph_seed()};
      s.client_index = p.client_index();
      if (p.segments_size() > kMaxUpdateSegments || p.segment_clips_size() != p.segments_size()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "secagg config: ", p.segments_size(), " segments and ", p.segment_clips_size(),
            " ranges; they must match, at most ", kMaxUpdateSegments));
      }
      s.quantization = {p.clip(),
                        p.quantizer_bits(),
                        p.max_weight(),
                        {p.segments().begin(), p.segments().end()},
                        {p.segment_clips().begin(), p.segment_clips().end()}};
      // 0 (unset) is none; anything else must be a damping in (0, 1].
      s.update_scale = p.update_scale() == 0 ? 1 : p.update_scale();
      if (!(s.update_scale > 0 && s.update_scale <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("secagg config: update scale ", p.update_scale(), " outside (0, 1]"));
      }
      d.start = s;
      break;
    }
    case v1::SecAggMessage::kDirectory: {
      SecAggKeyDirectory dir;
      dir.header = *h;
      for (const v1::SecAggPeer& p : m.directory().peers()) {
        SecAggPeerKeys k;
        k.client = p.client();
        if (absl::Status s = CopyBytes(p.encryption_key(), k.encryption_key, "key"); !s.ok())
          return s;
        if (absl::Status s = CopyBytes(p.masking_key(), k.masking_key, "key"); !s.ok()) return s;
        dir.peers.push_back(k);
        d.attestations.push_back({p.client_id(), p.certificate(), p.signature()});
      }
      d.directory = std::move(dir);
      break;
    }
    case v1::SecAggMessage::kShares: {
      SecAggShareDelivery del;
      del.header = *h;
      if (absl::Status s = SharesFrom(m.shares(), &del.shares); !s.ok()) return s;
      d.delivery = std::move(del);
      break;
    }
    case v1::SecAggMessage::kUnmaskRequest: {
      SecAggUnmaskRequest r;
      r.header = *h;
      r.survivors.assign(m.unmask_request().survivors().begin(),
                         m.unmask_request().survivors().end());
      r.dropped.assign(m.unmask_request().dropped().begin(), m.unmask_request().dropped().end());
      d.unmask_request = std::move(r);
      break;
    }
    default:
      break;
  }
  return d;
}

v1::SecAggMessage KeysToProto(const SecAggAdvertiseKeys& m, const std::string& client_id) {
  v1::SecAggMessage out;
  SetHeader(&out, m.header, client_id);
  out.mutable_keys()->set_encryption_key(Bytes(m.encryption_key));
  out.mutable_keys()->set_masking_key(Bytes(m.masking_key));
  out.mutable_keys()->set_seed_commitment(Bytes(m.seed_commitment));
  return out;
}

absl::StatusOr<SecAggAdvertiseKeys> KeysFromProto(const v1::SecAggMessage& m) {
  if (!m.has_keys()) return WrongBody(m, "public keys");
  absl::StatusOr<SecAggHeader> h = HeaderFromProto(m);
  if (!h.ok()) return h.status();
  SecAggAdvertiseKeys out;
  out.header = *h;
  absl::Status s = CopyBytes(m.keys().encryption_key(), out.encryption_key, "encryption key");
  if (s.ok()) s = CopyBytes(m.keys().masking_key(), out.masking_key, "masking key");
  if (s.ok()) s = CopyBytes(m.keys().seed_commitment(), out.seed_commitment, "seed commitment");
  if (!s.ok()) return s;
  return out;
}

v1::SecAggMessage SharesToProto(const SecAggShareKeys& m, const std::string& client_id) {
  v1::SecAggMessage out;
  SetHeader(&out, m.header, client_id);
  SharesTo(m.shares, out.mutable_shares());
  return out;
}

absl::StatusOr<SecAggShareKeys> SharesFromProto(const v1::SecAggMessage& m) {
  if (!m.has_shares()) return WrongBody(m, "encrypted shares");
  absl::StatusOr<SecAggHeader> h = HeaderFromProto(m);
  if (!h.ok()) return h.status();
  SecAggShareKeys out;
  out.header = *h;
  if (absl::Status s = SharesFrom(m.shares(), &out.shares); !s.ok()) return s;
  return out;
}

v1::SecAggMessage RevealToProto(const SecAggUnmaskResponse& m, const std::string& client_id) {
  v1::SecAggMessage out;
  SetHeader(&out, m.header, client_id);
  for (const SecAggRevealedShare& r : m.shares) {
    v1::SecAggRevealed* p = out.mutable_unmask_response()->add_shares();
    p->set_owner(r.owner);
    p->set_kind(static_cast<int32_t>(r.kind));
    for (uint64_t e : r.share) p->add_share(e);
  }
  return out;
}

absl::StatusOr<SecAggUnmaskResponse> RevealFromProto(const v1::SecAggMessage& m) {
  if (!m.has_unmask_response()) return WrongBody(m, "revealed shares");
  absl::StatusOr<SecAggHeader> h = HeaderFromProto(m);
  if (!h.ok()) return h.status();
  SecAggUnmaskResponse out;
  out.header = *h;
  for (const v1::SecAggRevealed& p : m.unmask_response().shares()) {
    SecAggRevealedShare r;
    r.owner = p.owner();
    if (p.kind() != 0 && p.kind() != 1) {
      return absl::InvalidArgumentError(absl::StrCat("secagg: unknown share kind ", p.kind()));
    }
    r.kind = static_cast<SecAggShareKind>(p.kind());
    if (p.share_size() != static_cast<int>(r.share.size())) {
      return absl::InvalidArgumentError("secagg: a revealed share has the wrong length");
    }
    std::copy(p.share().begin(), p.share().end(), r.share.begin());
    out.shares.push_back(r);
  }
  return out;
}

namespace {

absl::StatusOr<SecAggDownlink> Poll(v1::FederationService::StubInterface* stub,
                                    const v1::SecAggPoll& poll) {
  grpc::ClientContext context;
  context.set_deadline(DeadlineIn(static_cast<int64_t>(poll.wait_seconds()) + 60));
  v1::SecAggMessage reply;
  absl::Status s = FromGrpcStatus(stub->SecAggAwait(&context, poll, &reply));
  if (!s.ok()) return s;
  return DownlinkFromProto(reply);
}

}  // namespace

absl::StatusOr<SecAggDownlink> AwaitSecAgg(v1::FederationService::StubInterface* stub,
                                           const std::string& experiment_id, int64_t round,
                                           SecAggStage stage, const std::string& client_id,
                                           double wait_seconds) {
  v1::SecAggPoll poll;
  poll.set_experiment_id(experiment_id);
  poll.set_round(round);
  poll.set_stage(static_cast<int32_t>(stage));
  poll.set_client_id(client_id);
  poll.set_wait_seconds(wait_seconds);
  return Poll(stub, poll);
}

absl::StatusOr<SecAggDownlink> JoinSecAgg(v1::FederationService::StubInterface* stub,
                                          const std::string& experiment_id, int64_t base_version,
                                          const std::string& client_id, double wait_seconds) {
  v1::SecAggPoll poll;
  poll.set_experiment_id(experiment_id);
  poll.set_round(base_version);
  poll.set_stage(static_cast<int32_t>(SecAggStage::kAdvertiseKeys));
  poll.set_client_id(client_id);
  poll.set_wait_seconds(wait_seconds);
  poll.set_join_buffer(true);
  return Poll(stub, poll);
}

absl::StatusOr<int64_t> SubmitSecAgg(v1::FederationService::StubInterface* stub,
                                     const v1::SecAggMessage& message) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  v1::SecAggReceipt receipt;
  auto writer = stub->SecAggSubmit(&context, &receipt);
  writer->Write(message);
  writer->WritesDone();
  absl::Status s = FromGrpcStatus(writer->Finish());
  if (!s.ok()) return s;
  return static_cast<int64_t>(message.ByteSizeLong());
}

namespace {

// SubmitMaskedInput of d elements, pack(offset, count) giving each chunk packed.
absl::StatusOr<int64_t> SubmitPacked(v1::FederationService::StubInterface* stub,
                                     const SecAggHeader& header, int64_t d,
                                     const std::function<std::string(int64_t, int64_t)>& pack,
                                     const std::string& client_id, const SenderMetrics& metrics,
                                     int64_t chunk_elements, std::optional<int64_t> clients,
                                     int64_t rejected) {
  grpc::ClientContext context;
  v1::SecAggReceipt receipt;
  auto writer = stub->SecAggSubmit(&context, &receipt);
  v1::SecAggMessage m;
  SetHeader(&m, header, client_id);
  // Whole bytes per chunk, so that each chunk packs on its own.
  chunk_elements = std::max<int64_t>(8, chunk_elements / 8 * 8);
  return WriteChunked<v1::SecAggMessage>(
      *writer, m, d, chunk_elements, [&](int64_t off, int64_t n, v1::SecAggMessage& message) {
        v1::SecAggMaskedChunk* c = message.mutable_masked();
        c->set_offset(off);
        c->set_count(n);
        c->set_packed(pack(off, n));
        if (off == 0) {
          c->set_total_size(d);
          c->mutable_metrics()->set_train_loss(metrics.train_loss);
          c->mutable_metrics()->set_eval_loss(metrics.eval_loss);
          c->mutable_metrics()->set_eval_accuracy(metrics.eval_accuracy);
          c->mutable_metrics()->set_eval_weight(metrics.eval_weight);
          if (clients) c->mutable_metrics()->set_clients(*clients);
          c->mutable_metrics()->set_rejected(rejected);
        } else {
          c->clear_total_size();
          c->clear_metrics();
        }
      });
}

}  // namespace

absl::StatusOr<int64_t> SubmitMaskedInput(v1::FederationService::StubInterface* stub,
                                          const SecAggMaskedInput& input,
                                          const std::string& client_id, int ring_bits,
                                          const SenderMetrics& metrics, int64_t chunk_elements,
                                          std::optional<int64_t> clients, int64_t rejected) {
  auto pack = [&](int64_t off, int64_t n) {
    return PackRingVector(absl::MakeConstSpan(input.values).subspan(off, n), ring_bits);
  };
  return SubmitPacked(stub, input.header, static_cast<int64_t>(input.values.size()), pack,
                      client_id, metrics, chunk_elements, clients, rejected);
}

absl::StatusOr<int64_t> SubmitMaskedInput(v1::FederationService::StubInterface* stub,
                                          const SecAggHeader& header, const RingVector& values,
                                          const std::string& client_id,
                                          const SenderMetrics& metrics, int64_t chunk_elements,
                                          std::optional<int64_t> clients, int64_t rejected) {
  std::vector<uint64_t> words;
  auto pack = [&](int64_t off, int64_t n) {
    words.resize(static_cast<size_t>(n));
    values.Read(static_cast<size_t>(off), absl::MakeSpan(words));
    return PackRingVector(words, values.ring_bits());
  };
  return SubmitPacked(stub, header, static_cast<int64_t>(values.size()), pack, client_id, metrics,
                      chunk_elements, clients, rejected);
}

}  // namespace sextant
