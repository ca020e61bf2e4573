// What an experiment asks of its tiers, as pure functions of the experiment: the buffer, the
// secure quantisation, the weight bound, the stage timeout, and a regional aggregator's options.
// The orchestrator's global tier and every regional aggregator derive them here alike, from the
// experiment the orchestrator signs.
#ifndef SEXTANT_AGGREGATOR_TIER_SETTINGS_H_
#define SEXTANT_AGGREGATOR_TIER_SETTINGS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "aggregator/regional_aggregator.h"
#include "aggregator/secagg_hub.h"
#include "aggregator/tier.h"
#include "federation/round_coordinator.h"
#include "federation/server_optimizer.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// True for buffered (asynchronous, FedBuff) rounds: `mode: buffered`.
bool Buffered(const v1::Federation& f);

// A buffered round's staleness rule: max_staleness and the weighting (polynomial unless
// `staleness_weighting: constant`).
BufferPolicy StalenessPolicy(const v1::Federation& f);

// Buffered: the updates a region of `clients` clients buffers before it pushes them,
// ceil(buffer_size / regions), at least 1 and at most its clients (each client delivers once
// per buffer).
int64_t RegionBufferSize(const v1::Federation& f, int64_t clients);

// Buffered: the most of a region's `clients` that start training on one model version
// (BufferPolicy::starts_per_version), from federation.clients_per_round (FedBuff's
// concurrency): the region's share of ClientsPerRound by its clients, rounded up, at least its
// share of a buffer (RegionBufferSize) and 2 under secure aggregation, at most its clients.
// 0 (no limit) when clients_per_round is every client, the default.
int64_t RegionVersionStarts(const v1::Federation& f, int64_t clients);

// The quantisation of secure aggregation. Weights are example counts (at most a client's
// share: examples_per_client, or the whole training split), or 1 under DP. Each coordinate of
// an update is clipped to [-4, 4], or to C plus six standard deviations of distributed noise
// under DP, at 16 bits: the decoded mean is within 4 / 32767 of the plaintext one.
SecAggQuantization BaseQuantization(const v1::Federation& f);

// The most weight one client may declare, at both tiers and in secure rounds: its example
// share (examples_per_client, 60,000 when unset; a command client's declared cap), 1 under DP.
double MaxClientWeight(const v1::Federation& f);

// Each secure-aggregation stage after the first closes this long after it opened: the round
// deadline, or 30 s without one.
double StageTimeoutSeconds(const v1::Federation& f);

// The global tier's server optimiser (federation.server_optimizer at federation.server_lr,
// default FedAvg at 1.0), fresh.
std::unique_ptr<ServerOptimizer> MakeServerOptimizer(const v1::Federation& f);

// The global tier as federation f sets it: its coordinator (min_clients or a buffer's updates,
// the round deadline, ordered folds for federation.reproducible), which region speaks for how
// many clients and with what weight, and the regions' secure round under hide_region_sums.
// staging_dir receives a large model's region updates and the regions' masked sums. Where it
// listens, its credentials and its join handlers are its owner's. InvalidArgument when
// federation.reproducible meets a model too large to hold a round's updates in memory.
absl::StatusOr<TierOptions> GlobalTierOptions(const v1::Federation& f,
                                              const std::string& experiment_id, size_t model_size,
                                              const std::string& staging_dir);

// Region o->region's aggregator as `spec` sets it, into *o: its clients (ids REGION/0..N-1)
// and the weight each may declare; the aggregation rule and whether rounds fold in order
// (federation.reproducible); secure aggregation's quantisation and stage timeout, and hidden
// region sums with the ring's size (every client of the run); central DP's clip of plaintext
// updates; buffered rounds' staleness rule. Where the aggregator listens, stores and dials is
// its host's, not the experiment's, and is left alone. InvalidArgument when the experiment has
// no federation block or no region o->region, or asks for what a regional aggregator cannot do.
absl::Status ApplyExperiment(const v1::ExperimentSpec& spec, RegionalAggregatorOptions* o);

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_TIER_SETTINGS_H_
