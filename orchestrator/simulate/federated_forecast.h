#ifndef SEXTANT_ORCHESTRATOR_SIMULATE_FEDERATED_FORECAST_H_
#define SEXTANT_ORCHESTRATOR_SIMULATE_FEDERATED_FORECAST_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/simulate/run_timing.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// One forecast round: when it closes (seconds from the start) and what it adds.
struct RoundForecast {
  int64_t round = 0;
  double close_seconds = 0;
  double compute = 0;       // dollars: the participants' instances from the previous close
  double transfer = 0;      // dollars: the round's bytes between the regions and the global region
  bool waited_out = false;  // a participant was taken back during it, and it waited
};

struct FederatedForecast {
  std::vector<RoundForecast> rounds;  // every planned round, budget or not
  double wall_seconds = 0;            // start-up and every round
  double compute = 0, transfer = 0, total = 0;
  std::map<std::string, double> by_pool;  // compute, by the pool that hosts each participant
  int64_t bytes_per_round = 0;            // over every region's link to the global region
  int64_t preemptions = 0;                // spot participants this seed's market takes back
  double expected_preemptions = 0;        // the mean over all seeds
  // With budget.max_cost: the last round the run completes before it stops (all when it
  // does not stop).
  int64_t rounds_within_budget = 0;
};

// What a plain federated run of `parameters` model weights costs on its pools, round by round:
//   - time: every participant starts, then boots for simulate.boot_time (default 10 s); a round
//     takes simulate.client_seconds of training (default 5 s) plus its slowest region's model
//     down and aggregate up over simulate.link_mbps (default 100 Mbit/s; the global region's
//     own link is free and instant); a round during which the market takes a participant back
//     waits on top for its replacement to start (the boot) or until its deadline
//     (federation.round_deadline, also a secure round's stage timeout), whichever is sooner;
//   - compute: each participant billed per second from the start to the last round's close at
//     its pool's terms (the run's placement), a round being charged what the bills grow by up
//     to its close; a spot participant is taken back when the run's seeded market draws it
//     (SpotMarketSeed, as a live run of the same seed and time scale draws it), its
//     replacement billed from then on as a new instance, with its own minimum;
//   - transfer: per round, each region's model down and aggregate up (4 bytes a weight, 1 for
//     an int8 plaintext update, plus 0.15% of message framing as measured) at the catalog's
//     price between it and the global region.
// time_scale multiplies the spot interruption times as `sextant run --time-scale` does.
// `measured` (a run's own timing, MeasureRunTiming), when given, replaces the time model: the
// run starts up for its startup_seconds and every round takes its round_seconds, links
// included; a replacement still boots for simulate.boot_time when the block gives one (one
// instance's boot, which a run of all participants starting at once does not measure), else
// for the measured start-up.
// InvalidArgument as FederatedPlacement::Create when the pools cannot host the run.
absl::StatusOr<FederatedForecast> ForecastFederatedRun(const v1::ExperimentSpec& spec,
                                                       const Catalog& catalog, int64_t parameters,
                                                       double time_scale = 1,
                                                       const RunTiming* measured = nullptr);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SIMULATE_FEDERATED_FORECAST_H_
