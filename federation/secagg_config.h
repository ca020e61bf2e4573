#ifndef SEXTANT_FEDERATION_SECAGG_CONFIG_H_
#define SEXTANT_FEDERATION_SECAGG_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sextant {

// The public parameters of one round of secure aggregation (SecAgg+, Bell et al. CCS 2020, over
// the protocol of Bonawitz et al. CCS 2017). The server and every client of the round hold the
// same config; the transport distributes it with the round's start.
//
// Clients are numbered 0..num_clients-1 (the transport maps its client ids onto these indices).
// Each client has `degree` neighbours in a k-regular Harary graph whose node labels are permuted
// by graph_seed (SecAggGraph); it agrees pairwise masks with its neighbours only, and Shamir-
// shares its two secrets among its "holders": its neighbours and itself (degree + 1 of them),
// with `threshold` shares needed to reconstruct.
struct SecAggConfig {
  std::string experiment_id;  // default: empty (refused)
  int64_t round = 0;          // default 0
  int32_t num_clients = 0;    // n >= 2; default 0 (refused)
  int32_t degree = 0;         // k: even and < n, or n - 1 (complete graph); default 0 (refused)
  // t: shares needed among the k + 1 holders; (k + 1) / 2 < t <= k + 1, so that the server can
  // never gather t shares of both secrets of one client. Default 0 (refused).
  int32_t threshold = 0;
  int32_t ring_bits = 32;    // values are in Z_{2^ring_bits}, 1..64; default 32
  size_t vector_length = 0;  // ring elements per masked input, >= 1; default 0 (refused)
  uint64_t graph_seed = 0;   // public relabelling of the graph; default 0
};

// OK, or InvalidArgument naming the first bad field.
absl::Status ValidateSecAggConfig(const SecAggConfig& config);

// The neighbour graph of a config: the Harary graph H(k, n) (client at position p is joined to
// the positions p +- 1 .. p +- k/2 mod n) under a random permutation of labels drawn from
// graph_seed, as in SecAgg+; the complete graph when k = n - 1. Immutable; thread-compatible.
class SecAggGraph {
 public:
  explicit SecAggGraph(const SecAggConfig& config);
  // The neighbours of `client` (sorted, without the client itself).
  const std::vector<int32_t>& neighbours(int32_t client) const { return neighbours_[client]; }
  // Neighbours and the client itself, sorted: the holders of its shares.
  std::vector<int32_t> holders(int32_t client) const;
  bool adjacent(int32_t a, int32_t b) const;

 private:
  std::vector<std::vector<int32_t>> neighbours_;
};

// Chooses the degree k and threshold t from n, the expected dropout rate and a correctness
// parameter. The rule (documented in docs/secure-aggregation.md, "The protocol"):
//  - start from k = 2 * ceil(log2 n) (even), the O(log n) degree of Bell et al., capped at n - 1;
//  - t = floor((k + 1) / 2) + 1: a strict majority of the k + 1 holders, so that the server
//    cannot obtain t shares of both a client's mask key and its self-mask seed (the holders refuse
//    to reveal both kinds for one client, and two disjoint sets of t holders do not exist);
//  - raise k by 2 until the probability that some client keeps fewer than t surviving holders,
//    with independent dropouts at `dropout_rate` (union bound: n * P[Bin(k + 1, 1 - rate) < t]),
//    is at most 2^-correctness_bits; at k = n - 1 (complete graph) the choice stops there.
struct SecAggGraphChoice {
  int32_t degree = 0;
  int32_t threshold = 0;
  double failure_probability = 0;  // the union bound above for the chosen k, t
  bool meets_target = false;       // failure_probability <= 2^-correctness_bits
};
// InvalidArgument for n < 2 or a rate outside [0, 1).
absl::StatusOr<SecAggGraphChoice> ChooseSecAggGraph(int32_t num_clients, double dropout_rate,
                                                    int correctness_bits = 40);

// The config of one round for the transport: k and t from ChooseSecAggGraph(num_clients,
// dropout_rate, correctness_bits), the rest as given (graph_seed should be fresh per round).
// InvalidArgument as ChooseSecAggGraph and ValidateSecAggConfig.
absl::StatusOr<SecAggConfig> PlanSecAggRound(std::string experiment_id, int64_t round,
                                             int32_t num_clients, double dropout_rate,
                                             int32_t ring_bits, size_t vector_length,
                                             uint64_t graph_seed, int correctness_bits = 40);

// The second level (regions): every regional aggregator runs SecAggServer for its region's
// clients and then takes part, as a client holding its region's sum, in one more SecAgg round
// among the regions run by the global orchestrator, which therefore learns only the total. This
// returns that round's config: the complete graph over the regions and t = floor(R / 2) + 1 (for
// R = 2 both regions must report). InvalidArgument for fewer than 2 regions.
absl::StatusOr<SecAggConfig> RegionalLayerConfig(std::string experiment_id, int64_t round,
                                                 int32_t num_regions, int32_t ring_bits,
                                                 size_t vector_length, uint64_t graph_seed);

// Refuses aggregation rules that need individual updates: under secure aggregation the
// aggregator sees only the sum, so coordinate median, trimmed mean and (multi-)Krum cannot run.
// OK for "fedavg"/"mean"/"weighted_mean" (with any server optimiser after it); InvalidArgument
// with the explanation otherwise.
absl::Status ValidateSecureAggregationRule(absl::string_view rule);

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_SECAGG_CONFIG_H_
