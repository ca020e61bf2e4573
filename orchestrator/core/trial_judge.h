#ifndef SEXTANT_ORCHESTRATOR_CORE_TRIAL_JUDGE_H_
#define SEXTANT_ORCHESTRATOR_CORE_TRIAL_JUDGE_H_

#include <cstdint>
#include <functional>

#include "common/clock.h"
#include "orchestrator/core/objectives.h"
#include "orchestrator/core/trial_book.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// How a trial measures up: its objectives and constraints from what it reported, with the
// built-in metrics (its cost, its seconds) as of now, and what the sampler learns of it.
class TrialJudge {
 public:
  // cost: the trial's share of the ledger so far (the built-in metric `cost`); it is read
  // through the pointer each time, so that it may be set later; unset or null: 0.
  TrialJudge(const v1::ExperimentSpec& spec, Clock* clock,
             const std::function<double(int64_t trial)>* cost)
      : objectives_(spec), clock_(clock), cost_(cost) {}

  const ObjectiveSet& objectives() const { return objectives_; }
  // Unix seconds now, on the injected clock.
  double Now() const;
  // a is better than b on the first objective.
  bool Better(double a, double b) const;
  // v as the first objective minimises it.
  double Minimised(double v) const;
  double Cost(int64_t trial) const { return cost_ != nullptr && *cost_ ? (*cost_)(trial) : 0.0; }
  // The trial's objectives and constraints from its latest metrics and built-ins, now.
  TrialEvaluation Evaluate(const TrialEntry& e) const;
  // Copies the evaluation's values, feasibility and cost into e.row.
  void Record(TrialEntry& e) const;
  // The sampler's observation of e as its row records it (Record), with that outcome; from the
  // row alone, so that a resumed run's sampler sees what the first session saw.
  Observation Observed(const TrialEntry& e, Observation::Outcome outcome) const;
  // The current attempt ended: its wall time joins e.row.seconds.
  void EndAttemptClock(TrialEntry& e) const;

 private:
  ObjectiveSet objectives_;
  Clock* clock_;
  const std::function<double(int64_t)>* cost_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_TRIAL_JUDGE_H_
