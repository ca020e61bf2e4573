#ifndef SEXTANT_ORCHESTRATOR_COST_PLACEMENT_POLICY_H_
#define SEXTANT_ORCHESTRATOR_COST_PLACEMENT_POLICY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "orchestrator/cost/catalog.h"

namespace sextant {

// One pool as placement sees it at a moment.
struct PoolCandidate {
  std::string name;
  std::string region;
  Market market = Market::kOnDemand;
  double price_per_second = 0;  // for reserved pools: the reservation's rate
  InstanceType instance;
  int free_slots = 0;         // idle instances plus room to launch (0: full)
  bool prepaid_idle = false;  // reserved: an idle instance is already paid for
};

// What a job needs.
struct PlacementRequest {
  int gpus = 1;
  double gpu_memory_gb = 0;  // per GPU
  int cpus = 0;
  bool checkpoints = true;  // the trial can resume from a checkpoint after a preemption
  bool top_rung = false;    // the run to the top rung or a final evaluation
};

// The chosen pool (an index into the candidates), or none, with the reason for the event log.
struct Placement {
  int pool = -1;
  std::string reason;
  bool placed() const { return pool >= 0; }
  static Placement At(int pool, std::string reason) { return {pool, std::move(reason)}; }
  static Placement None(std::string reason) { return {-1, std::move(reason)}; }
};

struct PlacementOptions {
  enum class Mode {
    kCheapest,   // the cheapest pool that fits, any market
    kSpotFirst,  // spot for every trial that checkpoints; others on-demand or reserved
    kOnDemand,   // never spot
    kMixed,      // spot for low rungs of checkpointing trials; top rung on-demand or reserved
  };
  Mode mode = Mode::kSpotFirst;              // default spot_first
  double preemption_cooldown_seconds = 600;  // default 10 min
};

// Parses "cheapest", "spot_first", "on_demand" or "mixed". InvalidArgument otherwise.
absl::StatusOr<PlacementOptions::Mode> ParsePlacementMode(absl::string_view name);
const char* PlacementModeName(PlacementOptions::Mode mode);

// Cost-aware placement: among pools that fit the request and have a free slot, prepaid
// reserved capacity first, then the market preferred by the mode, then pools in regions without a
// preemption in the cool-down window, then the lowest marginal price (an idle prepaid reserved
// instance costs nothing more). Spot is never chosen for a job that must not run on spot while a
// non-spot pool exists (full or not): the job waits instead. Not thread-safe; runs on the
// orchestrator loop.
class PlacementPolicy {
 public:
  explicit PlacementPolicy(PlacementOptions options) : options_(options) {}

  // Chooses a pool for the request at time now.
  Placement Place(const PlacementRequest& request, const std::vector<PoolCandidate>& pools,
                  absl::Time now) const;

  // True when the request may run on pools[pool] at all: the pool fits it and its market is
  // allowed (spot is not, for a job the mode keeps off spot while a fitting non-spot pool
  // exists). Free slots and preemptions do not matter. Place chooses only among such pools.
  bool Admits(const PlacementRequest& request, const std::vector<PoolCandidate>& pools,
              int pool) const;

  // Records a preemption in region at time t: the region is avoided until t + cool-down.
  void OnPreemption(const std::string& region, absl::Time t);

  const PlacementOptions& options() const { return options_; }

 private:
  bool WantsSpot(const PlacementRequest& request) const;
  // Whether spot may be used for the request given these pools; *fallback says why when spot
  // is used only because no non-spot pool fits.
  bool SpotAllowed(const PlacementRequest& request, const std::vector<PoolCandidate>& pools,
                   std::string* fallback) const;
  bool Cooling(const std::string& region, absl::Time now) const;

  PlacementOptions options_;
  std::map<std::string, absl::Time> last_preemption_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_COST_PLACEMENT_POLICY_H_
