#ifndef SEXTANT_ORCHESTRATOR_CORE_OBJECTIVES_H_
#define SEXTANT_ORCHESTRATOR_CORE_OBJECTIVES_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/sampler.h"

namespace sextant {

// Built-in metrics every trial has, whatever it prints: its share of the ledger in the run's
// currency (every attempt counted) and the wall time of all its attempts.
inline constexpr const char* kCostMetric = "cost";
inline constexpr const char* kTrialSecondsMetric = "trial_seconds";

// What a trial's metrics say about the experiment's objectives and constraints.
struct TrialEvaluation {
  std::vector<double> values;      // each objective as reported, in objective order
  std::vector<double> violations;  // each constraint: <= 0 holds, > 0 by how much it fails,
                                   // +inf when the metric is missing
  std::vector<std::string> missing_constraints;  // constraint metrics the trial never reported
  std::string error;  // set when an objective is missing or not finite: the trial FAILS
  std::string missing_objective;  // the first objective metric never reported, if any
  bool ok() const { return error.empty(); }
  bool feasible() const;
};

// The objectives (one or 2 to 4) and constraints of an experiment, and the one place that
// turns a trial's metrics into objective values, feasibility and the sampler's Observation.
// Shared by `run` (the Dispatcher) and `simulate`. Immutable; thread-compatible.
class ObjectiveSet {
 public:
  explicit ObjectiveSet(const v1::ExperimentSpec& spec);

  int size() const { return static_cast<int>(objectives_.size()); }
  bool multi() const { return objectives_.size() > 1; }
  const std::vector<v1::Objective>& objectives() const { return objectives_; }
  const std::vector<v1::Constraint>& constraints() const { return constraints_; }

  // Every metric name a trial may need to report or get (objectives, then constraints).
  bool Mentions(const std::string& metric) const;

  // Evaluates the latest value of each metric (name -> value), with the built-in metrics
  // `cost` and `trial_seconds` taken from the arguments. Never fails: a missing or non-finite
  // objective is TrialEvaluation::error, naming the metric; a missing constraint metric makes
  // the trial infeasible and is listed in missing_constraints.
  TrialEvaluation Evaluate(const std::map<std::string, double>& metrics, double cost,
                           double seconds) const;

  // values with maximised objectives negated, so that every objective is minimised.
  std::vector<double> Minimised(absl::Span<const double> values) const;

  // The sampler's view of an evaluated trial: value (one objective) or values (several),
  // minimised, and the violations; cost when known.
  Observation ToObservation(const Params& params, Observation::Outcome outcome,
                            const TrialEvaluation& evaluation, std::optional<double> cost) const;

 private:
  std::vector<v1::Objective> objectives_;
  std::vector<v1::Constraint> constraints_;
};

// The hypervolume's reference point, in minimised units (maximised objectives negated), for
// the minimised feasible values `points`: each objective's `reference:` when the experiment
// gives one, else the worst value among points plus 10% of that objective's range (plus 1 when
// the range is 0, or 0 when there are no points). *derived says whether any was derived.
std::vector<double> ReferencePoint(const ObjectiveSet& objectives,
                                   const std::vector<std::vector<double>>& points, bool* derived);

// The share of the run's budget used, in [0, 1], for cost_aware sampling: spend against
// budget.max_cost when there is one, else trials created against search.max_trials.
double BudgetUsed(const v1::ExperimentSpec& spec, double spend, int64_t trials_created);

// The metric's value in `metrics`, or the built-in cost / trial_seconds.
std::optional<double> MetricValue(const std::string& metric,
                                  const std::map<std::string, double>& metrics, double cost,
                                  double seconds);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_OBJECTIVES_H_
