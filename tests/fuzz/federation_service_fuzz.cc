// Fuzz target: the FederationService's handling of every message it receives (RoundRequest for
// GetRound, the ModelChunk stream of PushUpdate), through the same RoundServing/UpdateReceiving the
// gRPC reactors drive, over a real FederationHub and RoundCoordinator with round 0 open for three
// clients of an 8-float model. Records (internal/records.h), by tag & 3:
//   0  a RoundRequest: served; tag & 0x10 fixes it up to a sampled client of this experiment.
//   1  a ModelChunk opening an update stream, followed by the records tagged 2 (its chunks);
//      tag & 0x10 fixes the ids up (and total_size on the first), tag & 0x08 breaks it off.
//   3  closes the round if it may close, and opens the next one.
// Every call goes through a SenderGate for region "r"; tag & 0x04 makes the caller a client
// certificate (sextant://client/r/N, N from the tag's top bits, which may differ from the id
// the message names).
// Invariants: a served model is the published one; an accepted update is whole; a closed
// round's mean is finite; no call waits (an update left staged would block the next one); a
// call from a certificate is served or accepted only for that certificate's own client id; an
// accepted id is a bounded REGION/NAME; a client's accepted weights never change.
#include <stdlib.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/federation_service.h"
#include "aggregator/sender_gate.h"
#include "common/clock.h"
#include "tests/fuzz/internal/records.h"

namespace {

constexpr int64_t kModel = 8;
const char kExperiment[] = "exp";

const std::vector<float>& Model() {
  static const std::vector<float> model = {0.5f, -1, 2, 0, 3.25f, -4, 1e-3f, 7};
  return model;
}

const std::string& ModelPath() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/sextant-federation-fuzz-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d == nullptr) abort();
    std::string p = std::string(d) + "/global.f32";
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(Model().data()), kModel * sizeof(float));
    return p;
  }();
  return path;
}

std::string Client(int k) { return absl::StrCat("r/", k % 3); }

// The certificate identity a record's call comes with (tag & 0x04), or none.
std::optional<sextant::PeerIdentity> Caller(uint8_t tag) {
  if ((tag & 0x04) == 0) return std::nullopt;
  return sextant::PeerIdentity{sextant::Role::kClient, "r", absl::StrCat((tag >> 6) % 3)};
}

// The served or accepted id must be the caller's own, and well formed.
void CheckAccepted(const std::optional<sextant::PeerIdentity>& caller, const std::string& id) {
  if (caller && caller->ClientId() != id) abort();
  if (!sextant::CheckClientId("id", id).ok()) abort();
}

void Publish(sextant::FederationHub& hub, int64_t round) {
  std::map<std::string, sextant::RoundTask> tasks;
  for (int k = 0; k < 3; ++k) {
    sextant::RoundTask t;
    t.model_size = kModel;
    t.seed = 7;
    tasks[Client(k)] = t;
  }
  if (!hub.Publish(round, ModelPath(), std::move(tasks), 0, 1).ok()) abort();
}

void ServeOne(sextant::FederationHub& hub, sextant::SenderGate& gate, uint8_t tag,
              const std::string& bytes, int64_t round) {
  sextant::v1::RoundRequest request;
  if (!request.ParseFromString(bytes)) return;
  if (tag & 0x10) {
    request.set_experiment_id(kExperiment);
    request.set_client_id(Client(tag >> 5));
    request.set_round(round - 1);
  }
  if (request.wait_seconds() > 0) request.set_wait_seconds(0);  // NaN and negatives stay
  // As the reactor drives it, without waiting (the wait is for the transport).
  std::vector<sextant::v1::ModelChunk> sent;
  sextant::RoundServing serving(&hub, &gate, Caller(tag), 1 + (tag >> 5), request);
  absl::Status s = serving.Check();
  if (s.ok() && serving.wait() > absl::ZeroDuration()) abort();
  if (s.ok()) s = serving.Poll().status();
  while (s.ok()) {
    sextant::v1::ModelChunk c;
    absl::StatusOr<bool> more = serving.Next(&c);
    s = more.status();
    if (!s.ok() || !*more) break;
    sent.push_back(std::move(c));
  }
  if (s.ok()) CheckAccepted(Caller(tag), request.client_id());
  if (!s.ok() || sent.empty() ||
      sent[0].assignment().kind() != sextant::v1::RoundAssignment::TRAIN) {
    return;
  }
  std::vector<float> got;
  for (size_t i = 1; i < sent.size(); ++i) {
    const std::string& d = sent[i].data();
    if (sent[i].offset() != static_cast<int64_t>(got.size()) || d.size() % sizeof(float)) abort();
    got.resize(got.size() + d.size() / sizeof(float));
    std::memcpy(got.data() + sent[i].offset(), d.data(), d.size());
  }
  if (got != Model()) abort();
}

void PushOne(sextant::FederationHub& hub, sextant::SenderGate& gate,
             std::map<std::string, double>& weights,
             const std::vector<sextant::fuzz::Record>& records, size_t* at, int64_t round) {
  const uint8_t tag = records[*at].tag;
  std::vector<sextant::v1::ModelChunk> chunks;
  for (size_t i = *at; i < records.size() && (i == *at || (records[i].tag & 3) == 2); ++i) {
    sextant::v1::ModelChunk c;
    if (c.ParseFromString(records[i].bytes)) {
      if (records[i].tag & 0x10) {
        c.set_experiment_id(kExperiment);
        c.set_round(round);
        c.set_client_id(Client(tag >> 5));
        if (i == *at) c.set_total_size(kModel);
      }
      chunks.push_back(std::move(c));
    }
    *at = i;
  }
  // As the reactor drives it: the staging buffer is always free here (one sender at a time).
  sextant::v1::UpdateReceipt receipt;
  absl::Status s = absl::InvalidArgumentError("empty update stream");
  if (!chunks.empty()) {
    sextant::UpdateReceiving receiving(&hub, &gate, Caller(tag));
    s = receiving.Start(chunks[0]);
    if (s.ok()) {
      absl::StatusOr<bool> begun = receiving.TryBegin();
      s = begun.ok() && !*begun ? absl::UnavailableError("staging busy") : begun.status();
    }
    for (size_t next = 1; s.ok() && next < chunks.size(); ++next) s = receiving.Add(chunks[next]);
    if (s.ok()) s = receiving.End((tag & 0x08) != 0, &receipt);
    receiving.Drop();
  }
  if (s.ok() && receipt.floats_received() != kModel) abort();
  if (s.ok()) {
    CheckAccepted(Caller(tag), chunks[0].client_id());
    auto [it, first] = weights.emplace(chunks[0].client_id(), chunks[0].weight());
    if (!first && it->second != chunks[0].weight()) abort();
  }
}

void CloseOne(sextant::FederationHub& hub, int64_t* round) {
  if (!hub.WaitReadyToClose(absl::ZeroDuration())) return;
  std::vector<sextant::SenderReport> senders;
  absl::StatusOr<sextant::RoundOutcome> out = hub.Close(&senders);
  if (!out.ok()) return;
  for (float v : out->mean) {
    if (!std::isfinite(v)) abort();
  }
  Publish(hub, ++*round);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sextant::FakeClock clock;
  sextant::RoundCoordinatorOptions o;
  o.experiment_id = kExperiment;
  o.model_size = kModel;
  auto coordinator = sextant::RoundCoordinator::Create(o, &clock);
  if (!coordinator.ok()) abort();
  sextant::FederationHub hub(*std::move(coordinator), &clock);
  sextant::TierPolicy policy;
  policy.region = "r";
  sextant::SenderGate gate(policy);
  std::map<std::string, double> weights;
  int64_t round = 0;
  Publish(hub, round);
  std::vector<sextant::fuzz::Record> records = sextant::fuzz::SplitRecords(data, size);
  for (size_t i = 0; i < records.size(); ++i) {
    switch (records[i].tag & 3) {
      case 0:
        ServeOne(hub, gate, records[i].tag, records[i].bytes, round);
        break;
      case 1:
        PushOne(hub, gate, weights, records, &i, round);
        break;
      case 2:
        break;  // a chunk with no stream open
      case 3:
        CloseOne(hub, &round);
        break;
    }
  }
  return 0;
}
