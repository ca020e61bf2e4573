#include "orchestrator/core/objectives.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace sextant {

bool TrialEvaluation::feasible() const {
  for (double v : violations) {
    if (!(v <= 0)) return false;
  }
  return true;
}

std::optional<double> MetricValue(const std::string& metric,
                                  const std::map<std::string, double>& metrics, double cost,
                                  double seconds) {
  auto it = metrics.find(metric);
  if (it != metrics.end()) return it->second;
  if (metric == kCostMetric) return cost;
  if (metric == kTrialSecondsMetric) return seconds;
  return std::nullopt;
}

ObjectiveSet::ObjectiveSet(const v1::ExperimentSpec& spec) {
  if (spec.objectives_size() > 0) {
    objectives_.assign(spec.objectives().begin(), spec.objectives().end());
  } else {
    objectives_.push_back(spec.objective());
  }
  constraints_.assign(spec.constraints().begin(), spec.constraints().end());
}

bool ObjectiveSet::Mentions(const std::string& metric) const {
  for (const v1::Objective& o : objectives_) {
    if (o.metric() == metric) return true;
  }
  for (const v1::Constraint& c : constraints_) {
    if (c.metric() == metric) return true;
  }
  return false;
}

TrialEvaluation ObjectiveSet::Evaluate(const std::map<std::string, double>& metrics, double cost,
                                       double seconds) const {
  TrialEvaluation e;
  for (const v1::Objective& o : objectives_) {
    std::optional<double> v = MetricValue(o.metric(), metrics, cost, seconds);
    if (!v) {
      if (e.error.empty()) {
        e.missing_objective = o.metric();
        e.error =
            absl::StrCat("the trial exited 0 but never reported the objective metric '", o.metric(),
                         "' (print a line such as '", o.metric(), "=0.42' on stdout)");
      }
      e.values.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    if (!std::isfinite(*v) && e.error.empty()) {
      e.error = absl::StrCat("the objective metric '", o.metric(), "' is ", *v,
                             "; it must be a finite number");
    }
    e.values.push_back(*v);
  }
  for (const v1::Constraint& c : constraints_) {
    std::optional<double> v = MetricValue(c.metric(), metrics, cost, seconds);
    if (!v || std::isnan(*v)) {
      e.missing_constraints.push_back(c.metric());
      e.violations.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    double violation = -std::numeric_limits<double>::infinity();
    if (c.has_max()) violation = std::max(violation, *v - c.max());
    if (c.has_min()) violation = std::max(violation, c.min() - *v);
    e.violations.push_back(violation);
  }
  return e;
}

std::vector<double> ObjectiveSet::Minimised(absl::Span<const double> values) const {
  std::vector<double> out(values.begin(), values.end());
  for (size_t i = 0; i < out.size() && i < objectives_.size(); ++i) {
    if (objectives_[i].goal() == v1::Objective::MAXIMIZE) out[i] = -out[i];
  }
  return out;
}

Observation ObjectiveSet::ToObservation(const Params& params, Observation::Outcome outcome,
                                        const TrialEvaluation& evaluation,
                                        std::optional<double> cost) const {
  Observation o;
  o.params = params;
  o.outcome = outcome;
  std::vector<double> minimised = Minimised(evaluation.values);
  bool all_finite = !minimised.empty();
  for (double v : minimised) all_finite = all_finite && std::isfinite(v);
  if (all_finite) {
    if (multi()) {
      o.values = std::move(minimised);
    } else {
      o.value = minimised[0];
    }
  }
  o.violations = evaluation.violations;
  o.cost = cost;
  return o;
}

double BudgetUsed(const v1::ExperimentSpec& spec, double spend, int64_t trials_created) {
  double used = 0;
  if (spec.budget().has_max_cost() && spec.budget().max_cost() > 0) {
    used = spend / spec.budget().max_cost();
  } else if (spec.search().max_trials() > 0) {
    used = static_cast<double>(trials_created) / spec.search().max_trials();
  }
  return std::clamp(used, 0.0, 1.0);
}

std::vector<double> ReferencePoint(const ObjectiveSet& objectives,
                                   const std::vector<std::vector<double>>& points, bool* derived) {
  *derived = false;
  std::vector<double> ref;
  for (int i = 0; i < objectives.size(); ++i) {
    const v1::Objective& o = objectives.objectives()[i];
    if (o.has_reference()) {
      ref.push_back(o.goal() == v1::Objective::MAXIMIZE ? -o.reference() : o.reference());
      continue;
    }
    *derived = true;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const std::vector<double>& p : points) {
      lo = std::min(lo, p[i]);
      hi = std::max(hi, p[i]);
    }
    if (points.empty()) {
      ref.push_back(0);
    } else {
      ref.push_back(hi + (hi > lo ? 0.1 * (hi - lo) : 1.0));
    }
  }
  return ref;
}

}  // namespace sextant
