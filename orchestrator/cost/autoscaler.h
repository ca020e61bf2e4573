#ifndef SEXTANT_ORCHESTRATOR_COST_AUTOSCALER_H_
#define SEXTANT_ORCHESTRATOR_COST_AUTOSCALER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "orchestrator/cost/catalog.h"

namespace sextant {

struct AutoscalerOptions {
  double idle_timeout_seconds = 300;  // an instance idle this long may go; default 5 min
  // An idle instance goes only within this many seconds of the end of its paid increment
  // (the increment is paid anyway, so it stays available until then); default 5.
  double release_window_seconds = 5;
};

// One pool's counts at the moment of a decision.
struct ScalingPool {
  int min_instances = 0;
  int max_instances = 1;
  int live = 0;          // launched and not terminated, booting included
  int booting = 0;       // launched, not ready yet
  int waiting = 0;       // jobs placed on this pool that no instance has taken yet
  bool prepaid = false;  // reserved capacity: releasing it saves nothing
};

// One live, ready instance.
struct ScalingInstance {
  int64_t id = 0;
  int pool = 0;  // index into the pools
  bool idle = false;
  absl::Time idle_since;  // when idle
  absl::Time launched;
  BillingTerms billing;
};

// What to do now: instances to launch per pool, and instances to terminate.
struct ScalingPlan {
  std::vector<int> launch;         // launch[pool]
  std::vector<int64_t> terminate;  // instance ids
};

// Grows pools from the queue and shrinks idle instances. Growth happens within one call: a
// pool gets max(min_instances - live, waiting - booting) new instances, capped at
// max_instances - live. An idle instance is terminated once it has been idle for
// idle_timeout and its paid increment ends within release_window (never earlier: that time is
// paid for), unless its pool is prepaid, has jobs waiting, or would drop below min_instances.
// Pure; thread-compatible.
class Autoscaler {
 public:
  explicit Autoscaler(AutoscalerOptions options) : options_(options) {}

  ScalingPlan Plan(absl::Time now, const std::vector<ScalingPool>& pools,
                   const std::vector<ScalingInstance>& instances) const;

  // The earliest time (>= now) at which the idle instance may be released; InfiniteFuture
  // when it is busy.
  absl::Time ReleaseAt(const ScalingInstance& instance, absl::Time now) const;

  const AutoscalerOptions& options() const { return options_; }

 private:
  AutoscalerOptions options_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_COST_AUTOSCALER_H_
