#include "orchestrator/core/dispatch_stats.h"

#include <algorithm>

#include "strategies/pareto.h"

namespace sextant {

DispatchStats CountTrials(const TrialBook& book, const TrialJudge& judge,
                          const v1::ExperimentSpec& spec, bool may_create) {
  const ObjectiveSet& objectives = judge.objectives();
  DispatchStats s;
  s.max_trials = spec.search().max_trials();
  s.created = static_cast<int>(book.size());
  std::vector<const TrialRow*> failed;
  for (const TrialEntry& e : book.entries()) {
    ++s.by_state[TrialStateName(e.row.state)];
    s.preemptions += e.row.preemptions;
    if (TrialEnded(e.row.state)) ++s.finished;
    if (e.row.state == v1::FAILED) {
      ++s.failed;
      failed.push_back(&e.row);
    }
    if (!objectives.multi() && e.row.state == v1::COMPLETED && e.row.value && e.row.feasible &&
        (!s.best_value || judge.Better(*e.row.value, *s.best_value))) {
      s.best_value = e.row.value;
      s.best_trial = e.row.id;
    }
  }
  if (objectives.multi()) {
    std::vector<std::vector<double>> points;
    for (const TrialEntry& e : book.entries()) {
      if (e.row.state == v1::COMPLETED && e.row.feasible &&
          e.row.values.size() == static_cast<size_t>(objectives.size())) {
        points.push_back(objectives.Minimised(e.row.values));
      }
    }
    s.front_size = static_cast<int>(ParetoFront(points).size());
    bool derived = false;
    s.hypervolume = Hypervolume(points, ReferencePoint(objectives, points, &derived));
  }
  const size_t shown = std::min<size_t>(failed.size(), 8);
  auto later = [](const TrialRow* a, const TrialRow* b) { return a->finished_at > b->finished_at; };
  std::partial_sort(failed.begin(), failed.begin() + shown, failed.end(), later);
  for (size_t i = shown; i-- > 0;) {
    s.recent_failures.emplace_back(failed[i]->id, failed[i]->error);
  }
  if (!may_create && s.max_trials > s.created) s.max_trials = s.created;
  if (spec.budget().has_max_cost()) s.budget = spec.budget().max_cost();
  return s;
}

}  // namespace sextant
