#ifndef SEXTANT_STRATEGIES_SCHEDULER_H_
#define SEXTANT_STRATEGIES_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace sextant {

// The fidelity axis of a multi-fidelity search (epochs, steps, ...).
struct FidelitySpec {
  std::string name;             // the metric key that marks the step, e.g. "epoch"
  double min = 1;               // the smallest budget a trial gets (r_min), > 0
  double max = 27;              // the largest (R), > min
  double reduction_factor = 3;  // eta, >= 2
};

// What a trial should do after a report.
struct Decision {
  enum class Kind { kContinue, kStop, kPause };
  Kind kind = Kind::kContinue;
  std::string reason;  // for kStop and kPause: why, for the event log

  static Decision Continue() { return {Kind::kContinue, ""}; }
  static Decision Stop(std::string why) { return {Kind::kStop, std::move(why)}; }
  static Decision Pause(std::string why) { return {Kind::kPause, std::move(why)}; }
};

// What a free worker should do next.
struct Job {
  enum class Kind {
    kNew,      // create a new trial (from the sampler) and run it to `target`
    kPromote,  // resume paused trial `trial` from its checkpoint and run it to `target`
    kWait,     // nothing can start now (e.g. a synchronous rung is filling); ask again later
    kDone,     // the schedule is finished
  };
  Kind kind = Kind::kWait;
  int64_t trial = 0;  // kPromote: which trial
  double target = 0;  // kNew, kPromote: the fidelity to run to
  int bracket = 0;    // the bracket the trial belongs to (0 for single-bracket schedulers)

  static Job New(double target, int bracket = 0) { return {Kind::kNew, 0, target, bracket}; }
  static Job Promote(int64_t trial, double target, int bracket = 0) {
    return {Kind::kPromote, trial, target, bracket};
  }
  static Job Wait() { return {Kind::kWait, 0, 0, 0}; }
  static Job Done() { return {Kind::kDone, 0, 0, 0}; }
};

// Decides how much fidelity each trial gets and whether it goes on, stops or pauses; the
// Sampler decides where trials go. Values are minimised (the caller negates for maximise).
// Deterministic given the sequence of calls. Pure: no clock, threads or I/O. Not thread-safe.
//
// The caller's protocol: a free worker calls NextJob(); for kNew the caller creates a trial and
// calls OnStart(trial, job); for kPromote it calls OnStart(trial, job) with the paused trial.
// Every measurement that carries the fidelity key goes to OnReportValues() (or OnReport() for
// one objective), whose Decision the caller passes to the worker. When the attempt ends,
// OnEnd() says how.
//
// Several objectives (MO-ASHA, Schmucker et al. 2021): a rung ranks its trials by
// non-dominated rank, then crowding distance (larger first), then trial id; the top
// floor(n_k / eta) by that order play the part of the best values. With one objective that
// order is the value, then the trial id. A report's objective count should be the same for
// every report of one search; the first report fixes it, and a later one with fewer values is
// padded with +inf (the worst), with more is truncated.
class Scheduler {
 public:
  virtual ~Scheduler() = default;

  // Returns what a free worker should do now. `new_allowed` is false when no new trial may be
  // created (max_trials reached, or the sampler is exhausted); then only promotions (or
  // kWait/kDone) are returned. kDone when nothing is running, nothing can be promoted, and
  // new_allowed is false. Changes no state: a job takes effect at OnStart(), so asking again
  // before OnStart() returns the same job.
  virtual Job NextJob(bool new_allowed) = 0;

  // A trial starts running towards job.target (a new trial, or a promoted one).
  virtual void OnStart(int64_t trial, const Job& job) = 0;

  // The trial reported `values` (one per objective, minimised, in objective order) at
  // `fidelity`. Returns kStop when it should be pruned now, kPause when it has reached its
  // target and must wait for a promotion, else kContinue. `feasible` false: the trial violates
  // a constraint at this report; at a rung it ranks after every feasible trial (and among the
  // infeasible ones by its values). A NaN value counts as +inf. Unknown trials get kContinue.
  // Overrides must not declare another default for `feasible`.
  virtual Decision OnReportValues(int64_t trial, double fidelity, absl::Span<const double> values,
                                  bool feasible = true) = 0;

  // One objective: exactly OnReportValues(trial, fidelity, {value}).
  Decision OnReport(int64_t trial, double fidelity, double value) {
    return OnReportValues(trial, fidelity, absl::MakeConstSpan(&value, 1));
  }

  // The attempt of a running trial ended. `reached_target`: it exited normally at or beyond
  // its target (a paused or finished trial). Otherwise it failed or was lost, and is no longer
  // considered for promotion.
  virtual void OnEnd(int64_t trial, bool reached_target) = 0;

  // For BOHB: the highest fidelity with at least min_count observations, and each trial's
  // values there (trial -> one value per objective, as recorded: NaN as +inf, padded or
  // truncated to the objective count). Infeasible reports are included; the caller knows which
  // trials violate constraints. Empty when no fidelity has enough.
  virtual std::map<int64_t, std::vector<double>> ValuesAtBestFidelity(int min_count) const = 0;

  // ValuesAtBestFidelity() with each trial's first objective only (trial -> value).
  std::map<int64_t, double> ObservationsAtBestFidelity(int min_count) const {
    std::map<int64_t, double> out;
    for (const auto& [trial, values] : ValuesAtBestFidelity(min_count)) {
      if (!values.empty()) out[trial] = values.front();
    }
    return out;
  }

  // A human-readable description of the plan (brackets, rungs), for the event log.
  virtual std::string Describe() const = 0;
};

// One bracket of Hyperband: n_i configurations at r_i, for each rung i.
struct BracketPlan {
  int s = 0;              // the bracket index (s_max .. 0)
  std::vector<int> n;     // n_i: configurations entering rung i
  std::vector<double> r;  // r_i: the budget at rung i
};

// The brackets of Hyperband (Li et al. 2018) for the given fidelity: s_max = floor(log_eta(R/r)),
// n = ceil((s_max+1)/(s+1) * eta^s), r = R * eta^-s, with n_i = floor(n * eta^-i),
// r_i = r * eta^i. Ordered s = s_max first.
std::vector<BracketPlan> HyperbandBrackets(const FidelitySpec& fidelity);

struct AshaOptions {
  FidelitySpec fidelity;
  // true: trials pause at each rung and resume from a checkpoint when promoted (promotion
  // mode); false: trials run on and are stopped at a rung when not in the top 1/eta
  // (stopping mode). Default true.
  bool promotion = true;
};
// Asynchronous successive halving (Li et al. 2020). Rungs at min * eta^k while below max, then
// max. A trial's value at a rung is its first report at or beyond that rung (up to its target).
// Promotion mode: NextJob() promotes, from the top rung down, the best paused trial in the top
// floor(n_k / eta) of rung k that was not promoted yet; else a new trial to the first rung.
// A trial that fails keeps its place in the ranking but is never promoted. Stopping mode: a
// trial is stopped at a rung below max once eta or more values are recorded there and its
// value is worse than the floor(n_k / eta)-th best; a value equal to it goes on. With several
// objectives (MO-ASHA) "best" is the rung order of the Scheduler comment, and stopping mode
// stops a trial that is not in the top floor(n_k / eta) by that order.
std::unique_ptr<Scheduler> NewAshaScheduler(AshaOptions options);

// Hyperband with asynchronous successive halving inside each bracket, and brackets run
// concurrently so that no worker idles while a rung waits. New trials are assigned to
// brackets in proportion to the paper's n (the s_max bracket first): by stride scheduling on
// n_0, so that every sum(n_0) consecutive new trials hold exactly n_0 of each bracket. A bracket
// runs in rounds of n_0 new trials, each ranked only against its own round, so a complete round
// promotes exactly the paper's n_i; the next new trial of the bracket opens a new round while
// older rounds keep promoting. Promotions come first, the highest target first. Job::bracket is
// the bracket's s. With several objectives each round ranks its rungs as MO-ASHA does (the
// Scheduler comment). ValuesAtBestFidelity pools equal budgets over brackets and rounds.
std::unique_ptr<Scheduler> NewHyperbandScheduler(FidelitySpec fidelity);

struct MedianStoppingOptions {
  FidelitySpec fidelity;
  int min_trials = 3;  // trials that must have reached a step before any is stopped; default 3
  double grace = 0;    // no stopping below this fidelity; 0 = fidelity.min
};
// Median stopping (Golovin et al. 2017): a trial is stopped at step t when its best value so
// far is worse than the median of the other trials' running averages up to t.
// The others are those that have reported at t or beyond (running, finished or stopped); a
// running average is the mean of a trial's values at steps <= t. No trial is stopped at max,
// where stopping saves nothing. New trials run to max. ObservationsAtBestFidelity uses each
// trial's first value at or beyond the ASHA rungs (min * eta^k, then max). The rule is not
// defined for several objectives: OnReportValues() decides on the first objective alone (the
// others are only recorded, for ValuesAtBestFidelity), and an infeasible report counts as
// +inf.
std::unique_ptr<Scheduler> NewMedianStoppingScheduler(MedianStoppingOptions options);

}  // namespace sextant

#endif  // SEXTANT_STRATEGIES_SCHEDULER_H_
