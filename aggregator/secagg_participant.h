#ifndef SEXTANT_AGGREGATOR_SECAGG_PARTICIPANT_H_
#define SEXTANT_AGGREGATOR_SECAGG_PARTICIPANT_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "aggregator/secagg_wire.h"
#include "common/clock.h"
#include "federation/round_coordinator.h"
#include "rpc/key_signer.h"
#include "sextant/v1/federation_service.grpc.pb.h"

namespace sextant {

struct SecAggParticipantOptions {
  std::string experiment_id;  // Required.
  std::string client_id;      // "<region>/<index>". Required.
  int64_t round = 0;
  // Buffered rounds: >= 0 is the model version the update was trained on. The client then asks
  // into the next SecAgg instance (JoinSecAgg), waiting up to stage_wait_seconds to be taken,
  // in place of round `round`, and multiplies its update by the instance's update_scale (its
  // staleness damping) before encoding it. Default -1: round `round`.
  int64_t join_version = -1;
  double poll_seconds = 5;  // long-poll bound per SecAggAwait. Default 5.
  // Give up the round when a stage has not opened for this client after this long (the
  // aggregator's own stage deadlines are normally shorter). Default 600.
  double stage_wait_seconds = 600;
  int64_t chunk_elements = kDefaultSecAggChunkElements;
  // Distributed differential privacy: Gaussian noise of standard deviation
  // noise_multiplier * noise_sensitivity / sqrt(t) is added to every coordinate of the update
  // before it is quantised, t being the round's SecAgg threshold: the fewest survivors whose sum
  // can ever be unmasked, so that every sum an aggregator can decode carries at least the
  // central noise (noise_multiplier * noise_sensitivity). Default 0: no noise.
  double noise_multiplier = 0;
  double noise_sensitivity = 0;
  // Drives the quantiser's stochastic rounding (SecureQuantizer::Encode). The update is masked
  // before it leaves, so the aggregator learns nothing from knowing it; the client derives it
  // from the round's seed and its id, as a compressed plaintext update's rounding, so that a
  // run with the same seed quantises the same way (federation.reproducible). Default 0.
  uint64_t rounding_seed = 0;
  // Under TLS: this participant's TLS identity. Its keys go out signed, and every neighbour's
  // keys must come with a valid signature of that neighbour (VerifyKeyDirectory), or the round
  // is refused for this participant (PermissionDenied naming the neighbour). Default null: no
  // signatures (the aggregator is trusted to relay keys honestly).
  const KeySigner* signer = nullptr;
  // Set (a spot notice, a signal): the participant goes no further than the stage it is in:
  // Cancelled while it waits for the next stage to open, which it then polls for at least every
  // 200 ms (poll_seconds bounds it otherwise). Default null: never.
  const std::atomic<bool>* stop = nullptr;
};

// Checks every key of a directory against its relayed attestation (one per peer, in order):
// the peer's certificate must chain to the signer's CA and speak for the attested id, and its
// signature must bind the experiment, round, the peer's index and id and both keys.
// PermissionDenied naming the first peer that fails; InvalidArgument when the attestations do
// not match the peers one for one.
absl::Status VerifyKeyDirectory(const KeySigner& signer, const std::string& experiment_id,
                                int64_t round, const SecAggKeyDirectory& directory,
                                const std::vector<PeerAttestation>& attestations);

// The client's side of one secure-aggregation round with its regional aggregator, over
// SecAggAwait / SecAggSubmit: it fetches the round's config, runs SecAggClient's four stages
// (advertise keys, share keys, masked input, unmask) and sends (w * q(update), w) encoded by
// SecureQuantizer (w = `weight`; fresh randomness from libsodium for every secret and DP noise,
// options.rounding_seed for the stochastic rounding). The update never leaves the process unmasked.
// Returns the bytes sent. Aborted when the round aborted or this client was dropped (its
// message came too late), Cancelled once options.stop is set, or the transport's status;
// InvalidArgument when the update's length does not match the round's vectors or the weight is
// outside [1, max_weight] (after the client's keys went out: it then drops out of the round like a
// client that went silent). clock (not owned) times stage_wait_seconds and must outlive the call.
absl::StatusOr<int64_t> RunSecAggParticipant(v1::FederationService::StubInterface* stub,
                                             const SecAggParticipantOptions& options, Clock* clock,
                                             absl::Span<const float> update, int64_t weight,
                                             const SenderMetrics& metrics);

// What a regional aggregator sends in the regions' round (federation.hide_region_sums).
struct RegionSum {
  RingVector sum;        // its clients' encoded sum (total weight last), in the regions' ring
  int64_t clients = 0;   // behind the sum (0 when none of its clients took part)
  int64_t rejected = 0;  // client updates it rejected this round
  SenderMetrics metrics;
};

// A regional aggregator's side of the regions' round with the orchestrator: the same four
// stages, with the region's sum (already encoded in the ring) as its input, so that the
// orchestrator learns only the regions' total. InvalidArgument when the sum's length or ring
// does not match the round's; otherwise as RunSecAggParticipant (clock included).
absl::StatusOr<int64_t> RunSecAggRegionParticipant(v1::FederationService::StubInterface* stub,
                                                   const SecAggParticipantOptions& options,
                                                   Clock* clock, RegionSum region);

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_SECAGG_PARTICIPANT_H_
