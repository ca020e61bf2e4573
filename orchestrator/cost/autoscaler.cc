#include "orchestrator/cost/autoscaler.h"

#include <algorithm>

namespace sextant {

absl::Time Autoscaler::ReleaseAt(const ScalingInstance& instance, absl::Time now) const {
  if (!instance.idle) return absl::InfiniteFuture();
  const absl::Time t =
      std::max(now, instance.idle_since + absl::Seconds(options_.idle_timeout_seconds));
  // The paid increment that is running at t ends at paid_end; release within the window of it.
  const double elapsed = absl::ToDoubleSeconds(t - instance.launched);
  const absl::Time paid_end =
      instance.launched + absl::Seconds(BilledSeconds(elapsed, instance.billing));
  const absl::Time earliest = paid_end - absl::Seconds(options_.release_window_seconds);
  if (earliest <= t) return t;
  // The window lies ahead in this increment; BilledSeconds is constant until paid_end.
  return earliest;
}

ScalingPlan Autoscaler::Plan(absl::Time now, const std::vector<ScalingPool>& pools,
                             const std::vector<ScalingInstance>& instances) const {
  ScalingPlan plan;
  plan.launch.assign(pools.size(), 0);
  std::vector<int> remaining(pools.size());
  for (size_t i = 0; i < pools.size(); ++i) {
    const ScalingPool& p = pools[i];
    const int want = std::max(p.min_instances - p.live, p.waiting - p.booting);
    plan.launch[i] = std::clamp(want, 0, std::max(0, p.max_instances - p.live));
    remaining[i] = p.live;
  }
  for (const ScalingInstance& inst : instances) {
    const ScalingPool& p = pools[inst.pool];
    if (!inst.idle || p.prepaid || p.waiting > 0 || plan.launch[inst.pool] > 0) continue;
    if (remaining[inst.pool] <= p.min_instances) continue;
    if (ReleaseAt(inst, now) > now) continue;
    plan.terminate.push_back(inst.id);
    --remaining[inst.pool];
  }
  return plan;
}

}  // namespace sextant
