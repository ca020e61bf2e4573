#ifndef SEXTANT_STRATEGIES_INTERNAL_RUNG_LADDER_H_
#define SEXTANT_STRATEGIES_INTERNAL_RUNG_LADDER_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/types/span.h"
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
// Values are minimised, one per objective. A rung orders its trials best first: with one
// objective by (infeasible, value, trial id); with several (MO-ASHA, Schmucker et al. 2021) the
// feasible trials by non-dominated rank, then the infeasible ones likewise, each rank by
// crowding distance (larger first), then trial id (a front that starts past the top goes by
// trial id alone, since its order decides nothing). "The top of rung k" is the first
// floor(n_k / eta) of that order. Several objectives are ranked lazily: a rung is re-ranked
// by the first query after it changed (so const queries update a cache).
// Not thread-safe, not even for const calls; runs on the orchestrator loop.
class RungLadder {
 public:
  // `rungs` is ascending and non-empty; the last rung is the full budget. `eta` >= 2.
  RungLadder(std::vector<double> rungs, double eta);

  const std::vector<double>& rungs() const { return rungs_; }
  double eta() const { return eta_; }
  int top_rung() const { return static_cast<int>(rungs_.size()) - 1; }

  // The objective count, fixed by the first Record() of a known trial; 0 before it.
  int objectives() const { return objectives_; }

  // True when `trial` was ever started in this ladder.
  bool Contains(int64_t trial) const { return trials_.count(trial) > 0; }

  // Starts a new trial towards `target`, which is rounded up to a rung (at most the top one).
  // A trial already in the ladder is left as it is.
  void StartNew(int64_t trial, double target);

  // Resumes a paused trial towards the next rung and marks it promoted from its current rung.
  // Returns false (and changes nothing) when the trial is not paused below the top rung.
  bool StartPromoted(int64_t trial);

  // Records `values` at every rung up to the trial's target that `fidelity` reaches and that
  // the trial has not recorded yet (the first report at or beyond a rung counts). NaN is
  // stored as +inf; values beyond objectives() are dropped and missing ones are +inf.
  // `feasible` false ranks the entry after every feasible one. Returns the indices of the
  // rungs recorded by this call, ascending; empty for an unknown trial.
  std::vector<int> Record(int64_t trial, double fidelity, absl::Span<const double> values,
                          bool feasible = true);

  // True when the trial is running and `fidelity` reaches its target.
  bool ReachesTarget(int64_t trial, double fidelity) const;

  // The index of the rung the trial runs (or ran) to; -1 for an unknown trial.
  int TargetRung(int64_t trial) const;

  // The trial's attempt ended. With `reached_target`, a trial that recorded its target rung
  // below the top is paused there and may be promoted; anything else is finished for good.
  void End(int64_t trial, bool reached_target);

  // Per ASHA (Li et al. 2020, Algorithm 2): from the top rung down, the first trial in the top
  // of rung k (by the rung's order) that is paused there and not yet promoted. nullopt when
  // there is none.
  std::optional<Promotion> FindPromotion() const;

  // Stopping mode: true when `rung` holds eta or more entries and the trial's entry there is
  // outside the top: with one objective, its (infeasible, value) is worse than that of the
  // floor(n_k / eta)-th entry (equal goes on); with several, it is not among the first
  // floor(n_k / eta). False when the trial recorded nothing at `rung`.
  bool OutsideTop(int rung, int64_t trial) const;

  // The first value of the floor(n_k / eta)-th entry of rung k (with one objective, the value
  // a trial must not exceed to be in the top 1/eta). nullopt while fewer than eta are recorded.
  std::optional<double> Cutoff(int rung) const;

  // The trial's non-dominated rank at `rung` (0 = the front of the feasible entries; the
  // infeasible ranks follow), for several objectives; -1 with one objective or no entry.
  int ParetoRank(int rung, int64_t trial) const;

  // The number of values recorded at rung k.
  int RecordedAt(int rung) const { return static_cast<int>(by_rung_[rung].entries.size()); }

  // True while any trial of this ladder is running.
  bool AnyRunning() const { return running_ > 0; }

  // Adds every recorded entry's values to `out`, keyed by the rung's fidelity, then trial.
  void CollectValues(std::map<double, std::map<int64_t, std::vector<double>>>* out) const;

 private:
  struct TrialState {
    int target = 0;    // rung index the current attempt runs to
    int recorded = 0;  // rungs 0 .. recorded-1 hold a value for this trial
    bool running = false;
    bool paused = false;    // ended at its target below the top rung; may be promoted
    std::vector<int> slot;  // slot[k]: the trial's entry index in rung k
  };
  struct Entry {
    int64_t trial = 0;
    bool feasible = true;
  };
  struct Rung {
    std::vector<Entry> entries;               // in arrival order
    std::vector<std::vector<double>> points;  // points[i]: entries[i]'s objectives_ values
    // Entry indices, best first. One objective: kept sorted on insertion. Several: rebuilt
    // by Rank() while `stale`, with position (entry -> index in order) and rank.
    std::vector<int> order;
    std::vector<int> position;
    std::vector<int> rank;
    bool stale = false;
    // One objective: the order keys of the trials paused at this rung, so that
    // FindPromotion() finds the best of them without walking the top of the rung.
    std::set<std::tuple<bool, double, int64_t>> paused;
  };
  // The order key of the trial's entry at rung k (one objective).
  std::tuple<bool, double, int64_t> KeyAt(int k, const TrialState& state) const;

  int RungAtOrAbove(double fidelity) const;
  std::vector<double> Normalised(absl::Span<const double> values) const;
  void Insert(Rung& rung, Entry entry, std::vector<double> values) const;
  // Rebuilds the order of a rung with several objectives. Past the front that completes the
  // top, crowding distances decide nothing and are not computed (those fronts go by trial id).
  void Rerank(Rung& rung) const;
  // The rung with its order up to date.
  const Rung& Ranked(int k) const;

  std::vector<double> rungs_;
  double eta_;
  int objectives_ = 0;
  std::unordered_map<int64_t, TrialState> trials_;
  mutable std::vector<Rung> by_rung_;  // mutable: the order of several objectives is a cache
  int running_ = 0;
};

// The trial -> values map at the highest fidelity with at least `min_count` entries; empty when
// none has enough. Implements Scheduler::ValuesAtBestFidelity over collected ladders.
std::map<int64_t, std::vector<double>> AtBestFidelity(
    const std::map<double, std::map<int64_t, std::vector<double>>>& by_fidelity, int min_count);

// The promotion-mode decision after `ladder` recorded a report of `trial` at `fidelity`: kPause
// when the report reaches the trial's target below the top rung, else kContinue (a trial whose
// target is the top rung runs to its end). `fidelity_name` is for the reason.
Decision PromotionModeDecision(const RungLadder& ladder, int64_t trial, double fidelity,
                               const std::string& fidelity_name);

// "1, 3, 9" style list of fidelities, for Describe().
std::string FormatFidelities(const std::vector<double>& fidelities);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_RUNG_LADDER_H_
