#ifndef SEXTANT_STRATEGIES_SAMPLER_H_
#define SEXTANT_STRATEGIES_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "strategies/search_space.h"

namespace sextant {

// What the sampler knows of one earlier trial. Values are always to be minimised: the caller
// negates them for `goal: maximize`.
struct Observation {
  enum class Outcome { kCompleted, kPruned, kFailed, kPending };
  Params params;
  Outcome outcome = Outcome::kPending;
  std::optional<double> value;  // set for kCompleted (and kPruned: the last value seen)
  // Several objectives: every objective's value, minimised, in objective order (kCompleted;
  // kPruned: the last values seen). Empty under a single objective, which uses `value`.
  std::vector<double> values;
  // Constraints, one entry per constraint in the experiment's order: <= 0 when satisfied,
  // else by how much it is exceeded (+inf when the trial did not report the metric). Empty
  // when the experiment has no constraints.
  std::vector<double> violations;
  // The trial's dollars so far (every attempt), when the ledger knows them. For cost_aware.
  std::optional<double> cost;
  // An earlier run's trial (search.warm_start), not one of this run: the model-based samplers
  // treat it as evidence about a related problem, weaker than this run's own trials (see
  // NewBayesianSampler, NewTpeSampler). Set by NewWarmStartedSampler.
  bool prior = false;
};

// True when every constraint of o holds (no constraints: true).
inline bool Feasible(const Observation& o) {
  for (double v : o.violations) {
    if (!(v <= 0)) return false;
  }
  return true;
}

struct SampleRequest {
  int64_t trial_number = 0;               // 0-based index of the trial being created
  absl::Span<const Observation> history;  // every earlier trial, in creation order; those
                                          // still running are kPending (batch suggestions
                                          // must account for them)
  // When set, the sampler appends one-line notes for the run's event log (e.g. "fitting on a
  // subset of 300 of 812 observations"). May be null.
  std::vector<std::string>* notes = nullptr;
  // The share of the run's budget already spent, in [0, 1] (dollars against max_cost, or
  // trials against max_trials without a cost cap). cost_aware samplers cool towards plain
  // expected improvement as it rises.
  double budget_used = 0;
};

// Proposes where the next trial goes. Deterministic: the same construction arguments and the
// same sequence of requests give the same answers. Not thread-safe.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // Returns the parameters for request.trial_number. Returns OutOfRange when the sampler has
  // no further points (a finished grid); the caller then stops creating trials.
  virtual absl::StatusOr<Params> Ask(const SampleRequest& request) = 0;
};

// Independent uniform draws (log-uniform for log parameters), seeded. Trial i's draw depends
// only on (seed, i), so it does not depend on the order results arrive in.
std::unique_ptr<Sampler> NewRandomSampler(SearchSpace space, uint64_t seed);

// The Cartesian product of every parameter's grid in lexicographic order (the first parameter
// varies slowest): floats get grid_points evenly spaced values (log-spaced for log), ints and
// floats with a step every value on their step (or grid_points of them, evenly spaced, when
// set), categoricals every value. OutOfRange after the last point.
std::unique_ptr<Sampler> NewGridSampler(SearchSpace space);

// Scrambled Sobol points: Joe–Kuo direction numbers (Boost.Random's sobol engine) with
// hash-based Owen scrambling seeded by seed, so any prefix of 2^m points is stratified in
// every dimension. Trial i gets point i.
std::unique_ptr<Sampler> NewSobolSampler(SearchSpace space, uint64_t seed);

// The start-up design of the model-based samplers: Sobol points (NewSobolSampler) when Boost's
// table covers the space's dimension, else independent uniform draws (NewRandomSampler).
std::unique_ptr<Sampler> NewStartupSampler(const SearchSpace& space, uint64_t seed);

struct BayesianOptions {
  uint64_t seed = 0;
  int objectives = 1;        // 2..4: independent GPs and expected hypervolume improvement
  int constraints = 0;       // modelled by GPs on the violations, as probability of feasibility
  bool cost_aware = false;   // one objective: EI per expected dollar (a GP on log cost),
                             // cooled towards plain EI as budget_used rises, after a design
                             // that continues with cheap Sobol points (CArBO)
  int initial_design = 0;    // Sobol points before the model is used; 0 = default (see .cc;
                             // larger with several objectives)
  int max_observations = 0;  // above this the GP is fitted on a subset; 0 = default
  // Several objectives: the hypervolume reference point, per objective in minimised units
  // (the experiment's `reference:`, negated for maximize). EHVI then counts only improvement
  // that is better than it in every objective. Empty (the default), or NaN for one objective:
  // derived from the observations (see ReferencePoint in internal/mo_gp_data.h).
  std::vector<double> reference;
};

// Gaussian-process Bayesian optimisation: Matérn-5/2 ARD kernel on the unit-cube encoding,
// hyperparameters by maximum marginal likelihood (NLopt L-BFGS, multi-start), log expected
// improvement optimised by Sobol screening plus bounded local refinement, pending trials
// accounted for so that concurrent suggestions spread out. Failed trials count as bad values.
// With several objectives: one GP per objective and exact expected hypervolume improvement
// (box decomposition, in log space) against the feasible front, pending trials fantasised at
// the posterior mean. With constraints: one GP per constraint, and the acquisition times the
// probability of feasibility. cost_aware: log EI minus α times the predicted log cost (a GP on
// log cost), α = (1 - budget_used) / (1 - the budget_used at the design's end) as in CArBO, so
// the cost counts in full right after the design and it is exactly plain EI once the budget is
// spent. Warm-started (observations marked `prior`), with one objective and no constraints or
// cost: a GP on the priors plus a GP on this run's differences from it (stacked residuals), so
// that own results override the priors near them; otherwise the priors join the observations
// as they are.
std::unique_ptr<Sampler> NewBayesianSampler(SearchSpace space, BayesianOptions options);

struct TpeOptions {
  uint64_t seed = 0;
  int objectives = 1;        // 2..4: MOTPE (split by non-dominated rank and hypervolume
                             // contribution, as Optuna 3.1)
  int constraints = 0;       // infeasible trials are never good
  int startup_trials = 10;   // random (Sobol) trials before the estimators are used
  int candidates = 24;       // candidates drawn from l(x) per suggestion
  bool multivariate = true;  // one joint Parzen estimator instead of one per parameter
  // Several objectives: the reference point of MOTPE's hypervolume subset and weights, per
  // objective in minimised units (the experiment's `reference:`, negated for maximize). Empty
  // (the default), or NaN for one objective: Optuna's, derived from the points (see
  // MotpeReference); also derived when no point is better than it in every objective.
  std::vector<double> reference;
};

// Tree-structured Parzen estimators (Bergstra et al.): splits observations into good and bad,
// and picks the candidate maximising l(x)/g(x). Follows Optuna 3.1's TPE (gamma, weights,
// prior, magic clip); the multivariate mode models the numeric parameters jointly with
// per-dimension neighbour-gap bandwidths and each categorical on its own. Warm-started
// (observations marked `prior`), one objective: once this run has finished trials, priors and
// own trials form their good sets apart, and the priors' weight fades as own trials finish.
std::unique_ptr<Sampler> NewTpeSampler(SearchSpace space, TpeOptions options);

struct Nsga2Options {
  uint64_t seed = 0;
  int objectives = 2;       // 2..4
  int population_size = 0;  // 0 = default (see .cc)
  double crossover_probability = 0.9;
  double mutation_probability = 0;  // per parameter; 0 = 1 / number of parameters
};

// NSGA-II (Deb et al. 2002) as an asynchronous sampler: parents are drawn by binary
// tournament (constraint domination, then non-dominated rank, then crowding distance) from the
// elite of the finished trials, children by SBX crossover and polynomial mutation (uniform
// crossover and random reset for categoricals). A child equal to a running or earlier trial is
// redrawn, so concurrent suggestions are distinct. Random (Sobol) points until the first
// population has finished.
std::unique_ptr<Sampler> NewNsga2Sampler(SearchSpace space, Nsga2Options options);

// `search.enqueue`: returns first[i] for trial i < first.size(), in order, without asking
// `then`; later trials are then's. The enqueued trials are ordinary trials: they appear in
// every later request's history. With renumber, `then` sees trial numbers that start at 0
// after the enqueued ones (the samplers that follow a fixed sequence by trial number: grid,
// sobol, random, so that none of their points is skipped); without, it sees the run's own
// numbers (the model-based samplers, whose start-up design the enqueued trials are part of).
// Returns `then` itself when first is empty.
std::unique_ptr<Sampler> NewEnqueuedSampler(std::vector<Params> first,
                                            std::unique_ptr<Sampler> then, bool renumber);

// `search.warm_start`: asks `inner` with the priors (earlier runs' completed trials, as
// observations in this run's minimised units), marked `prior`, ahead of each request's
// history, and with the trial number moved on by priors.size(), so that inner treats them as
// trials it has already seen (a start-up design they fill is skipped). For the samplers that learn
// from observations (bayesian, tpe, nsga2, BOHB's model); one that only follows its sequence would
// merely skip points. Returns `inner` itself when priors is empty.
std::unique_ptr<Sampler> NewWarmStartedSampler(std::vector<Observation> priors,
                                               std::unique_ptr<Sampler> inner);

}  // namespace sextant

#endif  // SEXTANT_STRATEGIES_SAMPLER_H_
