#ifndef SEXTANT_STRATEGIES_INTERNAL_RUNG_LADDER_H_
#define SEXTANT_STRATEGIES_INTERNAL_RUNG_LADDER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strategies/scheduler.h"

namespace sextant::internal {

// True when `fidelity` has reached the rung at `rung`. Rungs computed as min * eta^k carry
// rounding error (0.1 * 3 = 0.30000000000000004), so a relative tolerance of 1e-9 applies.
bool ReachedFidelity(double fidelity, double rung);

// eta^k by repeated multiplication, so that equal k give bitwise-equal results everywhere.
double EtaPower(double eta, int k);

// The ASHA rungs of `fidelity`: min * eta^k for k = 0, 1, ... while below max, then max itself.
std::vector<double> AshaRungs(const FidelitySpec& fidelity);

// A promotion found by RungLadder::FindPromotion().
struct Promotion {
  int64_t trial = 0;
  int from_rung = 0;  // the rung the trial is paused at; it is promoted to from_rung + 1
  double target = 0;  // the fidelity of rung from_rung + 1
};

// One ladder of rungs for successive halving: the values each trial recorded at each rung, and
// which trials are running, paused or promoted. ASHA is one ladder; asynchronous Hyperband is
// one ladder per bracket round; median stopping uses a ladder only to record rung values.
// Values are minimised. Not thread-safe; runs on the orchestrator loop.
class RungLadder {
 public:
  // `rungs` is ascending and non-empty; the last rung is the full budget. `eta` >= 2.
  RungLadder(std::vector<double> rungs, double eta);

  const std::vector<double>& rungs() const { return rungs_; }
  double eta() const { return eta_; }
  int top_rung() const { return static_cast<int>(rungs_.size()) - 1; }

  // True when `trial` was ever started in this ladder.
  bool Contains(int64_t trial) const { return trials_.count(trial) > 0; }

  // Starts a new trial towards `target`, which is rounded up to a rung (at most the top one).
  // A trial already in the ladder is left as it is.
  void StartNew(int64_t trial, double target);

  // Resumes a paused trial towards the next rung and marks it promoted from its current rung.
  // Returns false (and changes nothing) when the trial is not paused below the top rung.
  bool StartPromoted(int64_t trial);

  // Records `value` at every rung up to the trial's target that `fidelity` reaches and that
  // the trial has not recorded yet (the first report at or beyond a rung counts). Returns the
  // indices of the rungs recorded by this call, ascending; empty for an unknown trial.
  std::vector<int> Record(int64_t trial, double fidelity, double value);

  // True when the trial is running and `fidelity` reaches its target.
  bool ReachesTarget(int64_t trial, double fidelity) const;

  // The index of the rung the trial runs (or ran) to; -1 for an unknown trial.
  int TargetRung(int64_t trial) const;

  // The trial's attempt ended. With `reached_target`, a trial that recorded its target rung
  // below the top is paused there and may be promoted; anything else is finished for good.
  void End(int64_t trial, bool reached_target);

  // Per ASHA (Li et al. 2020, Algorithm 2): from the top rung down, the best-valued trial in
  // the top floor(n_k / eta) of rung k that is paused there and not yet promoted. Ties in
  // value go to the lower trial id. nullopt when there is none.
  std::optional<Promotion> FindPromotion() const;

  // The value a trial must not exceed to be in the top 1/eta of rung k: the
  // floor(n_k / eta)-th best value recorded there. nullopt while fewer than eta are recorded.
  std::optional<double> Cutoff(int rung) const;

  // The number of values recorded at rung k.
  int RecordedAt(int rung) const { return static_cast<int>(by_rung_[rung].size()); }

  // True while any trial of this ladder is running.
  bool AnyRunning() const { return running_ > 0; }

  // Adds every recorded value to `out`, keyed by the rung's fidelity, then trial.
  void CollectObservations(std::map<double, std::map<int64_t, double>>* out) const;

 private:
  struct TrialState {
    int target = 0;    // rung index the current attempt runs to
    int recorded = 0;  // rungs 0 .. recorded-1 hold a value for this trial
    bool running = false;
    bool paused = false;  // ended at its target below the top rung; may be promoted
  };

  int RungAtOrAbove(double fidelity) const;

  std::vector<double> rungs_;
  double eta_;
  std::unordered_map<int64_t, TrialState> trials_;
  // Per rung: (value, trial), kept sorted ascending so that the top of a rung is its prefix.
  std::vector<std::vector<std::pair<double, int64_t>>> by_rung_;
  int running_ = 0;
};

// The trial -> value map at the highest fidelity with at least `min_count` values; empty when
// none has enough. Implements Scheduler::ObservationsAtBestFidelity over collected ladders.
std::map<int64_t, double> AtBestFidelity(
    const std::map<double, std::map<int64_t, double>>& by_fidelity, int min_count);

// The promotion-mode decision after `ladder` recorded a report of `trial` at `fidelity`: kPause
// when the report reaches the trial's target below the top rung, else kContinue (a trial whose
// target is the top rung runs to its end). `fidelity_name` is for the reason.
Decision PromotionModeDecision(const RungLadder& ladder, int64_t trial, double fidelity,
                               const std::string& fidelity_name);

// "1, 3, 9" style list of fidelities, for Describe().
std::string FormatFidelities(const std::vector<double>& fidelities);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_RUNG_LADDER_H_
