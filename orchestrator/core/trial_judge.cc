#include "orchestrator/core/trial_judge.h"

#include <algorithm>
#include <limits>

namespace sextant {

double TrialJudge::Now() const { return absl::ToDoubleSeconds(clock_->Now() - absl::UnixEpoch()); }

bool TrialJudge::Better(double a, double b) const {
  return objectives_.objectives()[0].goal() == v1::Objective::MAXIMIZE ? a > b : a < b;
}

double TrialJudge::Minimised(double v) const {
  return objectives_.objectives()[0].goal() == v1::Objective::MAXIMIZE ? -v : v;
}

TrialEvaluation TrialJudge::Evaluate(const TrialEntry& e) const {
  double seconds = e.row.seconds;
  if (e.attempt_started > 0) seconds += std::max(0.0, Now() - e.attempt_started);
  return objectives_.Evaluate(e.latest, Cost(e.row.id), seconds);
}

void TrialJudge::EndAttemptClock(TrialEntry& e) const {
  if (e.attempt_started > 0) e.row.seconds += std::max(0.0, Now() - e.attempt_started);
  e.attempt_started = 0;
}

void TrialJudge::Record(TrialEntry& e) const {
  const TrialEvaluation ev = Evaluate(e);
  if (objectives_.multi()) e.row.values = ev.values;
  e.row.feasible = ev.feasible();
  e.row.violations = ev.violations;
  e.row.cost = Cost(e.row.id);
}

// The ledger of an earlier session is not live when the store is loaded: hence the row alone.
Observation TrialJudge::Observed(const TrialEntry& e, Observation::Outcome outcome) const {
  TrialEvaluation ev;
  if (objectives_.multi()) {
    ev.values = e.row.values;
  } else if (e.row.value) {
    ev.values = {*e.row.value};
  }
  ev.violations = e.row.violations;
  if (ev.violations.size() != objectives_.constraints().size()) {
    // A row from before violations were stored: what is known is whether it was feasible.
    ev.violations.assign(objectives_.constraints().size(),
                         e.row.feasible ? 0.0 : std::numeric_limits<double>::infinity());
  }
  return objectives_.ToObservation(e.params, outcome, ev, e.row.cost);
}

}  // namespace sextant
