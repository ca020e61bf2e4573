#ifndef SEXTANT_ORCHESTRATOR_CORE_FAILURE_POLICY_H_
#define SEXTANT_ORCHESTRATOR_CORE_FAILURE_POLICY_H_

#include <optional>
#include <string>

#include "orchestrator/core/trial_book.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// search.max_failed_trials as it holds: the value set, else max(5, ceil(max_trials / 5)).
int MaxFailedTrials(const v1::Search& search);
// search.max_failed_in_a_row as it holds: the value set, else 5.
int MaxFailedInARow(const v1::Search& search);

// The failure policy of a run that launches its trials, read after a trial ended: why the run
// must end FAILED, quoting the error, once search.max_failed_trials trials have failed or the
// last search.max_failed_in_a_row ended trials all failed with the same error. Only trials
// that ended at or after session_started count (a resumed run, its cause fixed, goes on).
// nullopt while neither bound is passed.
std::optional<std::string> FailureBoundsPassed(const TrialBook& book, const v1::Search& search,
                                               double session_started);

// For a run that has finished: why it must end FAILED when no trial completed or was pruned
// and at least one failed, quoting the last error; else nullopt.
std::optional<std::string> EveryTrialFailed(const TrialBook& book);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_FAILURE_POLICY_H_
