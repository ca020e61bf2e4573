// A federated search on pools, seen as one account in dollars: each trial's federated run bills
// its own participants (in its own store), and the study adds them up.
#ifndef SEXTANT_ORCHESTRATOR_CORE_STUDY_COST_H_
#define SEXTANT_ORCHESTRATOR_CORE_STUDY_COST_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/core/store.h"

namespace sextant {

// What the trials of the federated search in `run_dir` (trials 1..trials) have been billed so
// far: every cost row of each trial's own run (RunDir::FederatedTrialDir; a trial whose run has
// not started has none), its times moved by `offsets[trial]` seconds (where the trial's run
// started in the search's time), and one "trial" row per trial with its total, so that the
// search's results, report and budget read them as a search's own. A running trial's store may
// still be being created (running(trial) true): one that cannot be read yet counts as no bills.
// Internal when another trial's store cannot be read.
absl::StatusOr<std::vector<CostRow>> FederatedTrialCosts(
    const std::string& run_dir, int64_t trials, const std::map<int64_t, double>& offsets,
    const std::function<bool(int64_t)>& running);

// The dollars of `rows` (every row but the "trial" attribution rows, which repeat them).
double BilledTotal(const std::vector<CostRow>& rows);

// The most one round of a trial has cost so far: over trials that ran rounds, the largest of
// their bill (their "trial" row) per round run (`rounds[trial]`); 0 when none did.
double CostPerRound(const std::vector<CostRow>& rows, const std::map<int64_t, double>& rounds);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_STUDY_COST_H_
