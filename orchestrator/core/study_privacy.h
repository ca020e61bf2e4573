// A federated search with DP, seen as one study on the same clients: what each trial may spend,
// what each spent, and random stopping's draw (federation/study_privacy.h holds the math).
#ifndef SEXTANT_ORCHESTRATOR_CORE_STUDY_PRIVACY_H_
#define SEXTANT_ORCHESTRATOR_CORE_STUDY_PRIVACY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "federation/study_privacy.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// The most one trial of spec may spend: federation.rounds rounds at its noise multiplier, at the
// largest sampling rate its parameters allow (clients_per_round tuned: its largest value).
TrialPrivacy PlannedTrialPrivacy(const v1::ExperimentSpec& spec);

// spec's random stopping (privacy.selection: random_stopping), or nullopt with composition.
std::optional<RandomStopping> RandomStoppingOf(const v1::ExperimentSpec& spec);

// The number of trials of a new run of spec under random stopping, drawn from its distribution
// with a generator seeded by `seed` (the run's search.seed).
int64_t DrawStudyTrials(const RandomStopping& r, uint64_t seed);

// What a trial's federated run (its folder, RunDir::FederatedTrialDir) has spent so far, from
// its stored privacy; nullopt when it has none (not started, or no DP round yet).
std::optional<TrialPrivacy> SpentByTrialRun(const std::string& trial_run_dir);

// Random stopping releases only the best trial's model: every other trial's models and
// checkpoints (its federated run's model/, artifacts/ and federation/ folders: model files,
// checkpoints, the global and regional model copies) are deleted; its rounds, its scores and its
// logs stay. Returns the trials whose models were deleted.
int DeleteUnreleasedModels(const std::string& run_dir, int64_t best_trial, int64_t trials);

// budget.max_epsilon of a federated search: how many trials in all may be created now. A trial
// that has ended counts what its run spent; every other created trial what it may spend
// (PlannedTrialPrivacy), so that no trial starts that could take the study past the cap.
// Not thread-safe.
class StudyPrivacyBudget {
 public:
  StudyPrivacyBudget(const v1::ExperimentSpec& spec, std::string run_dir);

  // Trials 1..created exist, ended(id) saying which have ended. Returns the most trials the
  // study may have in all (created + those that still fit; at least created).
  int64_t CreateLimit(int64_t created, const std::function<bool(int64_t)>& ended);
  // From the last CreateLimit: the study's epsilon with the created trials, and with one more.
  double committed() const { return committed_; }
  double with_next() const { return with_next_; }
  double max_epsilon() const { return max_epsilon_; }

 private:
  std::string run_dir_;
  double max_epsilon_;
  int64_t max_trials_;
  TrialPrivacy planned_;
  std::vector<double> orders_;
  double delta_;
  std::map<int64_t, TrialPrivacy> ended_;  // what each ended trial's run spent
  double committed_ = 0, with_next_ = 0;
  // The last answer, for the same (created, ended) counts.
  int64_t last_created_ = -1;
  size_t last_ended_ = 0;
  int64_t last_limit_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_STUDY_PRIVACY_H_
