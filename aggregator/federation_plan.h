// What every participant derives alike from an experiment's federation block, so that the
// orchestrator, the aggregators and the clients agree on it.
#ifndef SEXTANT_AGGREGATOR_FEDERATION_PLAN_H_
#define SEXTANT_AGGREGATOR_FEDERATION_PLAN_H_

#include <cstdint>
#include <vector>

#include "federation/rdp_accountant.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// The clients of every region together.
int64_t TotalClients(const v1::Federation& federation);

// The largest weight one client's update may carry under secure aggregation, the bound the
// quantizer encodes: 1 under DP (each update weighs 1), else examples_per_client, or 60,000
// (Fashion-MNIST's training split) when unset. With data: own it is the declared cap on the
// num_examples a client command may report.
int64_t SecAggMaxWeight(const v1::Federation& federation);

// The L2 norm each client clips its update to under DP; 0 without DP.
double DpClipNorm(const v1::Federation& federation);

// The noise multiplier sigma of distributed DP; 0 with central noise or without DP.
double DistributedNoiseMultiplier(const v1::Federation& federation);

// The largest standard deviation of the noise one client adds under distributed DP:
// sigma * C / sqrt(2), 2 being the smallest SecAgg threshold of any round (each client
// calibrates to its own round's threshold, SecAggParticipantOptions); 0 without it.
double MaxClientNoiseStddev(const v1::Federation& federation);

// Clients sampled per round: clients_per_round as a fraction of all (rounded up) or a count,
// at least min_clients, at most all.
int64_t ClientsPerRound(const v1::Federation& f);

// Under secure aggregation, how many of ClientsPerRound(f) clients each region (in f.regions
// order) gives a round: its share of them by its number of clients, at least 2 (a region's
// masked sum of one client would be that client's update), at most all of its clients, the
// quotas summing to ClientsPerRound. Empty without secure aggregation, or where that is
// impossible (fewer than 2 x regions per round; the loader refuses such an experiment).
std::vector<int64_t> RegionQuotas(const v1::Federation& f);

// The privacy accountant's options for a run of federation f with federation.dp: its noise
// multiplier, the chance a client takes part in a round (ClientsPerRound over all clients),
// its delta (default 1e-5) and target, and integer orders only when clients are sampled.
RdpAccountantOptions DpAccountantOptions(const v1::Federation& f);

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_FEDERATION_PLAN_H_
