#include "aggregator/secagg_participant.h"

#include <sodium.h>

#include <algorithm>
#include <array>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "federation/dp_noise.h"
#include "federation/secagg_client.h"
#include "federation/secure_quantizer.h"

namespace sextant {
namespace {

// Polls until `stage` opens for this client. Aborted when the round aborted or the wait ran out;
// FailedPrecondition (dropped) becomes Aborted too: the client sits this round out. Cancelled
// once o.stop is set.
// With o.join_version >= 0, stage 0 is asked for as a buffer instance's (JoinSecAgg).
absl::StatusOr<SecAggDownlink> Await(v1::FederationService::StubInterface* stub,
                                     const SecAggParticipantOptions& o, Clock* clock,
                                     SecAggStage stage, int32_t index = kSecAggServer) {
  const absl::Time until = clock->Now() + absl::Seconds(o.stage_wait_seconds);
  const bool join = o.join_version >= 0 && stage == SecAggStage::kAdvertiseKeys;
  // A stop must be seen while the stage is still to open: long-polls of at most 200 ms then.
  const double poll = o.stop != nullptr ? std::min(o.poll_seconds, 0.2) : o.poll_seconds;
  while (true) {
    if (o.stop != nullptr && o.stop->load()) {
      return absl::CancelledError(absl::StrCat("stopped (a spot notice or a signal) before the ",
                                               SecAggStageName(stage), " stage"));
    }
    absl::StatusOr<SecAggDownlink> d =
        join ? JoinSecAgg(stub, o.experiment_id, o.join_version, o.client_id, poll)
             : AwaitSecAgg(stub, o.experiment_id, o.round, stage, o.client_id, poll);
    if (absl::IsFailedPrecondition(d.status())) return absl::AbortedError(d.status().message());
    if (!d.ok()) return d.status();
    if (d->stage == SecAggStage::kAborted) {
      return absl::AbortedError(absl::StrCat("secagg round ", o.round, " aborted"));
    }
    if (!d->pending) {
      // The wire addresses a message by client id; the protocol by index.
      for (SecAggHeader* h : {d->directory ? &d->directory->header : nullptr,
                              d->delivery ? &d->delivery->header : nullptr,
                              d->unmask_request ? &d->unmask_request->header : nullptr}) {
        if (h == nullptr) continue;
        h->sender = kSecAggServer;
        h->recipient = index;
      }
      return d;
    }
    if (clock->Now() > until) {
      return absl::AbortedError(
          absl::StrCat("the ", SecAggStageName(stage), " stage did not open in time"));
    }
  }
}

std::array<uint8_t, 32> Fresh() {
  std::array<uint8_t, 32> e;
  randombytes_buf(e.data(), e.size());
  return e;
}

// The round's input, encoded in the ring, from the round start (SecAggRoundStart).
using Encoder = std::function<absl::StatusOr<RingVector>(const SecAggRoundStart&)>;

// The four stages for one input. `clients` (a region's; nullopt for a client) and `rejected` go
// in the clear with the masked input.
absl::StatusOr<int64_t> RunStages(v1::FederationService::StubInterface* stub,
                                  const SecAggParticipantOptions& options, Clock* clock,
                                  const Encoder& encode, const SenderMetrics& metrics,
                                  std::optional<int64_t> clients, int64_t rejected) {
  if (sodium_init() < 0) return absl::InternalError("libsodium failed to start");
  SEXTANT_ASSIGN_OR_RETURN(SecAggDownlink first,
                           Await(stub, options, clock, SecAggStage::kAdvertiseKeys));
  if (!first.start) return absl::InvalidArgumentError("secagg: the round start has no config");
  const SecAggRoundStart& start = *first.start;
  // A buffer's instance is whichever took the client; from here on it is the round.
  SecAggParticipantOptions o = options;
  if (o.join_version >= 0) {
    o.round = start.config.round;
    o.join_version = -1;
  }
  if (start.config.experiment_id != o.experiment_id || start.config.round != o.round) {
    return absl::AbortedError("secagg: the round start is for another experiment or round");
  }
  SEXTANT_ASSIGN_OR_RETURN(SecAggClient client,
                           SecAggClient::Create(start.config, start.client_index, Fresh()));
  int64_t sent = 0;
  SEXTANT_ASSIGN_OR_RETURN(SecAggAdvertiseKeys keys, client.AdvertiseKeys());
  v1::SecAggMessage advertised = KeysToProto(keys, o.client_id);
  if (o.signer != nullptr) {
    SEXTANT_ASSIGN_OR_RETURN(
        KeyAttestation attestation,
        o.signer->Sign(KeyBinding(o.experiment_id, o.round, start.client_index, o.client_id,
                                  KeyBytes(keys.encryption_key), KeyBytes(keys.masking_key))));
    advertised.mutable_keys()->set_signature(attestation.signature);
    advertised.mutable_keys()->set_certificate(attestation.certificate_pem);
  }
  SEXTANT_ASSIGN_OR_RETURN(int64_t n, SubmitSecAgg(stub, advertised));
  sent += n;

  SEXTANT_ASSIGN_OR_RETURN(SecAggDownlink dir,
                           Await(stub, o, clock, SecAggStage::kShareKeys, start.client_index));
  if (!dir.directory) return absl::InvalidArgumentError("secagg: no key directory");
  if (o.signer != nullptr) {
    SEXTANT_RETURN_IF_ERROR(
        VerifyKeyDirectory(*o.signer, o.experiment_id, o.round, *dir.directory, dir.attestations));
  }
  SEXTANT_ASSIGN_OR_RETURN(SecAggShareKeys shares, client.HandleKeyDirectory(*dir.directory));
  SEXTANT_ASSIGN_OR_RETURN(n, SubmitSecAgg(stub, SharesToProto(shares, o.client_id)));
  sent += n;

  SEXTANT_ASSIGN_OR_RETURN(SecAggDownlink del,
                           Await(stub, o, clock, SecAggStage::kMaskedInput, start.client_index));
  if (!del.delivery) return absl::InvalidArgumentError("secagg: no share delivery");
  SEXTANT_RETURN_IF_ERROR(client.HandleShareDelivery(*del.delivery));
  {  // The O(d) buffer lives only until the masked input is sent.
    SEXTANT_ASSIGN_OR_RETURN(RingVector input, encode(start));
    SEXTANT_ASSIGN_OR_RETURN(SecAggHeader header, client.MaskInput(&input));
    SEXTANT_ASSIGN_OR_RETURN(n, SubmitMaskedInput(stub, header, input, o.client_id, metrics,
                                                  o.chunk_elements, clients, rejected));
    sent += n;
  }

  SEXTANT_ASSIGN_OR_RETURN(SecAggDownlink req,
                           Await(stub, o, clock, SecAggStage::kUnmask, start.client_index));
  if (!req.unmask_request) return absl::InvalidArgumentError("secagg: no unmask request");
  SEXTANT_ASSIGN_OR_RETURN(SecAggUnmaskResponse reveal,
                           client.HandleUnmaskRequest(*req.unmask_request));
  SEXTANT_ASSIGN_OR_RETURN(n, SubmitSecAgg(stub, RevealToProto(reveal, o.client_id)));
  return sent + n;
}

}  // namespace

absl::Status VerifyKeyDirectory(const KeySigner& signer, const std::string& experiment_id,
                                int64_t round, const SecAggKeyDirectory& directory,
                                const std::vector<PeerAttestation>& attestations) {
  if (attestations.size() != directory.peers.size()) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: ", directory.peers.size(),
                                                   " keys in the directory but ",
                                                   attestations.size(), " attestations"));
  }
  for (size_t i = 0; i < attestations.size(); ++i) {
    const SecAggPeerKeys& peer = directory.peers[i];
    const PeerAttestation& a = attestations[i];
    // The hub numbers a round's participants in the order of their sorted ids: ids must rise
    // with the index, so that no participant's keys can stand in for another's.
    if (i > 0 && (peer.client <= directory.peers[i - 1].client ||
                  a.client_id <= attestations[i - 1].client_id)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "secagg: the key directory's peers are out of order at '", a.client_id, "'"));
    }
    SEXTANT_RETURN_IF_ERROR(
        signer.Verify(KeyAttestation{a.certificate_pem, a.signature},
                      KeyBinding(experiment_id, round, peer.client, a.client_id,
                                 KeyBytes(peer.encryption_key), KeyBytes(peer.masking_key)),
                      a.client_id.empty() ? absl::StrCat("client ", peer.client) : a.client_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> RunSecAggParticipant(v1::FederationService::StubInterface* stub,
                                             const SecAggParticipantOptions& o, Clock* clock,
                                             absl::Span<const float> update, int64_t weight,
                                             const SenderMetrics& metrics) {
  auto encode = [&](const SecAggRoundStart& start) -> absl::StatusOr<RingVector> {
    if (start.config.vector_length != update.size() + 1) {
      return absl::InvalidArgumentError(absl::StrCat("secagg: the round's vectors hold ",
                                                     start.config.vector_length,
                                                     " elements, this "
                                                     "update ",
                                                     update.size(), " + 1"));
    }
    if (weight < 1 || weight > start.quantization.max_weight) {
      return absl::InvalidArgumentError(absl::StrCat(
          "secagg: weight ", weight, " is outside [1, ", start.quantization.max_weight,
          "] (the round's max_weight: a client's examples up to examples_per_client)"));
    }
    SEXTANT_ASSIGN_OR_RETURN(
        SecureQuantizer quantizer,
        MakeQuantizer(start.quantization, start.config.num_clients, start.config.ring_bits));
    if (o.noise_multiplier > 0 || start.update_scale != 1) {
      std::vector<float> x(update.begin(), update.end());
      // A buffer's stale update is damped as the plaintext buffer damps it (WeightedAverage::
      // AddDamped): its values scaled, its weight whole.
      if (start.update_scale != 1) {
        for (float& v : x) v = static_cast<float>(v * start.update_scale);
      }
      if (o.noise_multiplier > 0) {
        const double stddev =
            DistributedNoiseStddev(o.noise_multiplier, o.noise_sensitivity, start.config.threshold);
        SEXTANT_RETURN_IF_ERROR(AddGaussianNoise(absl::MakeSpan(x), stddev, Fresh()));
      }
      return quantizer.Encode(x, weight, o.rounding_seed);
    }
    return quantizer.Encode(update, weight, o.rounding_seed);
  };
  return RunStages(stub, o, clock, encode, metrics, std::nullopt, 0);
}

absl::StatusOr<int64_t> RunSecAggRegionParticipant(v1::FederationService::StubInterface* stub,
                                                   const SecAggParticipantOptions& o, Clock* clock,
                                                   RegionSum region) {
  auto encode = [&](const SecAggRoundStart& start) -> absl::StatusOr<RingVector> {
    if (start.config.vector_length != region.sum.size() ||
        start.config.ring_bits != region.sum.ring_bits()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "secagg: the regions' round takes ", start.config.vector_length, " elements in a ",
          start.config.ring_bits, "-bit ring; this region's sum has ", region.sum.size(), " in a ",
          region.sum.ring_bits(), "-bit ring"));
    }
    return std::move(region.sum);
  };
  return RunStages(stub, o, clock, encode, region.metrics, region.clients, region.rejected);
}

}  // namespace sextant
