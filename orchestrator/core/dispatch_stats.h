#ifndef SEXTANT_ORCHESTRATOR_CORE_DISPATCH_STATS_H_
#define SEXTANT_ORCHESTRATOR_CORE_DISPATCH_STATS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "orchestrator/core/trial_book.h"
#include "orchestrator/core/trial_judge.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// Counts and the best value so far, for progress lines and `status`.
struct DispatchStats {
  int max_trials = 0;
  int created = 0;
  std::map<std::string, int> by_state;  // state name -> count
  int finished = 0;                     // COMPLETED + PRUNED + FAILED
  std::optional<double> best_value;
  int64_t best_trial = 0;
  int preemptions = 0;           // attempts ended by a preemption notice, all trials
  std::optional<double> spend;   // committed spend, when instances are billed
  std::optional<double> budget;  // budget.max_cost, when set
  // Several objectives: no best_value; the size of the front of feasible completed trials.
  int front_size = 0;
  std::optional<double> hypervolume;  // several objectives: of that front (see results.h)
  int failed = 0;                     // trials that ended FAILED
  // The latest trials to fail (at most 8), in the order they failed: id and error.
  std::vector<std::pair<int64_t, std::string>> recent_failures;
};

// The statistics of the book's trials. may_create: whether new trials may still be made (when
// not, max_trials is the count made).
DispatchStats CountTrials(const TrialBook& book, const TrialJudge& judge,
                          const v1::ExperimentSpec& spec, bool may_create);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_DISPATCH_STATS_H_
