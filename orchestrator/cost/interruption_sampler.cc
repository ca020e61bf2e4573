#include "orchestrator/cost/interruption_sampler.h"

#include <algorithm>
#include <limits>

namespace sextant {

Interruption InterruptionSampler::Sample(const InterruptionModel& model) {
  Interruption out;
  // Two draws per call whatever the model, so that one instance's model does not shift the
  // draws of the instances after it.
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double u = unit(rng_);
  const double v = unit(rng_);
  if (model.rate_per_day <= 0) {
    out.after_seconds = std::numeric_limits<double>::infinity();
    return out;
  }
  const double rate_per_second = model.rate_per_day / 86400.0;
  out.after_seconds = -std::log1p(-u) / rate_per_second;
  out.notice = v < model.notice_probability;
  out.notice_seconds = out.notice ? std::min(model.notice_seconds, out.after_seconds) : 0;
  return out;
}

Interruption Scaled(const Interruption& i, double time_scale) {
  Interruption out = i;
  out.after_seconds = i.after_seconds * time_scale;
  out.notice_seconds =
      i.notice ? std::max(kMinScaledNoticeSeconds, i.notice_seconds * time_scale) : 0;
  return out;
}

}  // namespace sextant
