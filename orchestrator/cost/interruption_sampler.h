#ifndef SEXTANT_ORCHESTRATOR_COST_INTERRUPTION_SAMPLER_H_
#define SEXTANT_ORCHESTRATOR_COST_INTERRUPTION_SAMPLER_H_

#include <cstdint>
#include <random>

#include "orchestrator/cost/catalog.h"

namespace sextant {

// When one spot instance will be taken back.
struct Interruption {
  double after_seconds = 0;   // from launch; infinity when the rate is 0
  bool notice = false;        // a notice arrives notice_seconds before (clipped at launch)
  double notice_seconds = 0;  // how much warning (0 without a notice)
};

// The least notice a run under --time-scale gives, in seconds: the market's two minutes shrunk
// by the scale would end before a trial or a participant could act on them.
inline constexpr double kMinScaledNoticeSeconds = 0.5;

// `i` in a run whose time is multiplied by time_scale (1: real time): its time scaled, and its
// notice scaled but at least kMinScaledNoticeSeconds (0 without a notice).
Interruption Scaled(const Interruption& i, double time_scale);

// Draws spot interruptions from an InterruptionModel: exponential times with the model's rate
// per instance-day, a notice with its probability. Seeded and deterministic: the same seed and
// sequence of calls give the same draws. Not thread-safe.
class InterruptionSampler {
 public:
  explicit InterruptionSampler(uint64_t seed) : rng_(seed) {}

  // Draws the interruption of an instance launched now.
  Interruption Sample(const InterruptionModel& model);

 private:
  std::mt19937_64 rng_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_COST_INTERRUPTION_SAMPLER_H_
