// What a plain federated run's experiment asks of its tiers, as pure functions of its
// federation block: the buffer, the secure quantisation, the weight bound, the stage timeout,
// and each regional aggregator's flags.
#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATION_SETTINGS_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATION_SETTINGS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "aggregator/secagg_hub.h"
#include "federation/round_coordinator.h"
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

// The experiment's settings for region r's aggregator, as its flags: what the run gives the
// aggregators it starts and the plan one started by hand joins with. `model_size` is the
// global model's number of floats.
std::vector<std::string> AggregatorFlags(const v1::Federation& f, const v1::FederatedRegion& r,
                                         const std::string& experiment_id, size_t model_size);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_FEDERATION_SETTINGS_H_
