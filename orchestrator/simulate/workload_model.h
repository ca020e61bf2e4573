#ifndef SEXTANT_ORCHESTRATOR_SIMULATE_WORKLOAD_MODEL_H_
#define SEXTANT_ORCHESTRATOR_SIMULATE_WORKLOAD_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "orchestrator/cost/param_expression.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/search_space.h"

namespace sextant {

// The simulated workload of `sextant simulate`: how long trials take and what they report.
// Defaults (for unset fields of the `simulate:` block): seconds_per_unit 60, seconds_per_trial
// 600, attempt_overhead 30 s, checkpoint_every 1 unit, checkpoint_time 20 s, boot_time 60 s,
// tick 10 s, noise 0.01, seed = search.seed, objective "branin" when numeric parameters x0
// and x1 exist, else "curve".
//
// Objectives, as functions of the parameters x and the fidelity f in (0, F] (F = the fidelity
// max; F = 1 without a fidelity):
//   branin: g(x) = Branin(x0, x1) (minimum 0.397887 at (-pi, 12.275), (pi, 2.275), ...)
//   curve:  g(x) = mean over parameters of (u_i - c_i)^2, u_i the unit encoding of x_i and c_i
//           a seeded optimum in [0.1, 0.9]
// reported value(x, f) = g(x) + s * (sqrt(F / f) - 1) + noise, s = 2 (branin) or 0.2 (curve):
// a learning curve that falls to g(x) at F. The noise is Gaussian with the given standard
// deviation, drawn from (seed, trial, f), so a step replayed after a preemption reports the
// same value. Thread-compatible.
class WorkloadModel {
 public:
  explicit WorkloadModel(const v1::ExperimentSpec& spec);

  // The value a trial reports at fidelity f (for maximise goals, the negated curve, so that
  // better is still higher).
  double Value(const Params& params, int64_t trial, double fidelity) const;
  // g(x): the noise-free value at the top fidelity.
  double Final(const Params& params) const;

  const v1::Simulation& options() const { return options_; }
  bool has_fidelity() const { return has_fidelity_; }
  double max_fidelity() const { return max_fidelity_; }
  // Virtual seconds one unit of fidelity takes (seconds_per_trial without a fidelity).
  double seconds_per_unit() const;
  // The same for one trial: seconds_per_unit_expression evaluated at its numeric parameters
  // when the experiment gives one (a categorical counts as its value's index), else
  // seconds_per_unit(). A non-positive or non-finite result falls back to seconds_per_unit().
  double seconds_per_unit(const Params& params) const;

 private:
  v1::Simulation options_;
  SearchSpace space_;
  bool has_fidelity_ = false;
  double max_fidelity_ = 1;
  bool maximize_ = false;
  std::vector<double> centres_;
  std::shared_ptr<ParamExpression> time_expression_;  // null without one
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SIMULATE_WORKLOAD_MODEL_H_
