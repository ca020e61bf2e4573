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
};

struct SampleRequest {
  int64_t trial_number = 0;                 // 0-based index of the trial being created
  absl::Span<const Observation> history;    // every earlier trial, in creation order; those
                                            // still running are kPending (batch suggestions
                                            // must account for them)
  // When set, the sampler appends one-line notes for the run's event log (e.g. "fitting on a
  // subset of 300 of 812 observations"). May be null.
  std::vector<std::string>* notes = nullptr;
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
// varies slowest): floats get grid_points evenly spaced values (log-spaced for log), ints every
// value (or grid_points when set), categoricals every value. OutOfRange after the last point.
std::unique_ptr<Sampler> NewGridSampler(SearchSpace space);

// Scrambled Sobol points: Joe–Kuo direction numbers (Boost.Random's sobol engine) with
// hash-based Owen scrambling seeded by seed, so any prefix of 2^m points is stratified in
// every dimension. Trial i gets point i.
std::unique_ptr<Sampler> NewSobolSampler(SearchSpace space, uint64_t seed);

struct BayesianOptions {
  uint64_t seed = 0;
  int initial_design = 0;     // Sobol points before the model is used; 0 = default (see .cc)
  int max_observations = 0;   // above this the GP is fitted on a subset; 0 = default
};

// Gaussian-process Bayesian optimisation: Matérn-5/2 ARD kernel on the unit-cube encoding,
// hyperparameters by maximum marginal likelihood (NLopt L-BFGS, multi-start), log expected
// improvement optimised by Sobol screening plus bounded local refinement, pending trials
// accounted for so that concurrent suggestions spread out. Failed trials count as bad values.
std::unique_ptr<Sampler> NewBayesianSampler(SearchSpace space, BayesianOptions options);

struct TpeOptions {
  uint64_t seed = 0;
  int startup_trials = 10;    // random (Sobol) trials before the estimators are used
  int candidates = 24;        // candidates drawn from l(x) per suggestion
  bool multivariate = true;   // one joint Parzen estimator instead of one per parameter
};

// Tree-structured Parzen estimators (Bergstra et al.): splits observations into good and bad,
// and picks the candidate maximising l(x)/g(x). Follows Optuna 3.1's TPE (gamma, weights,
// prior, magic clip); the multivariate mode models the numeric parameters jointly with
// per-dimension neighbour-gap bandwidths and each categorical on its own.
std::unique_ptr<Sampler> NewTpeSampler(SearchSpace space, TpeOptions options);

}  // namespace sextant

#endif  // SEXTANT_STRATEGIES_SAMPLER_H_
