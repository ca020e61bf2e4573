#ifndef SEXTANT_ORCHESTRATOR_CORE_WARM_START_H_
#define SEXTANT_ORCHESTRATOR_CORE_WARM_START_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/core/objectives.h"
#include "orchestrator/core/store.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {

// One completed trial of an earlier run, as this run's sampler sees it.
struct PriorTrial {
  int run = 0;                     // index into WarmStart::from
  int64_t trial = 0;               // its id in that run
  Params params;                   // a point of this run's space
  std::vector<double> values;      // this run's objectives, as reported (not minimised)
  std::vector<double> violations;  // this run's constraints (<= 0 holds; +inf: not reported)
  std::optional<double> cost;      // its dollars in that run, when known
};

// What `search.warm_start` gave a run. It is read from the earlier runs once, when the run
// starts, and kept in the run's own store (meta "warm_start"), so that a resume, `results`
// and `report` see the same priors after the earlier runs have changed or are gone.
struct WarmStart {
  std::vector<std::string> from;       // the earlier run directories, in the experiment's order
  std::vector<PriorTrial> trials;      // the priors used, run by run, in trial id order
  int completed = 0;                   // COMPLETED trials found in them (used + dropped)
  std::map<std::string, int> dropped;  // why a completed trial was not used -> how many

  bool empty() const { return from.empty(); }
  int dropped_count() const;
  // The priors as the sampler's observations (minimised; in objective order).
  std::vector<Observation> Observations(const ObjectiveSet& objectives) const;
  // One line for the run's events, e.g. "183 prior observations from 2 runs (/w/runs/a: 100
  // used; /w/runs/b: 83 used), of 190 completed trials; 7 dropped: 5 parameter 'momentum'
  // not in this space, 2 'lr' outside this space".
  std::string Summary() const;
  // The stored form (a JSON object; non-finite numbers as "inf", "-inf", "nan").
  std::string ToJson() const;
  // The inverse of ToJson, typed by space. DataLoss when the text is not a stored WarmStart.
  static absl::StatusOr<WarmStart> FromJson(const std::string& json, const SearchSpace& space);
};

// Checks that dir can seed spec: it is a Sextant run directory (state.db holding an
// experiment), and each of spec's objectives is one of its objectives with the same goal.
// Opens the store read-only without taking the run's lock (the run may be live). NotFound
// naming dir when it or its state.db does not exist; InvalidArgument naming the run and the
// metric for an objective it does not share; FailedPrecondition for a store without an
// experiment. Returns the earlier run's experiment.
absl::StatusOr<v1::ExperimentSpec> CheckWarmStartRun(const std::string& dir,
                                                     const v1::ExperimentSpec& spec);

// Reads the completed trials of spec.search().warm_start().runs(), each checked with
// CheckWarmStartRun (whose errors it returns). A trial whose parameters do not fit spec's
// space (a parameter this space lacks, one it needs and the trial lacks, a value outside it)
// or without a finite value of every objective is dropped and counted by reason. Empty when
// the experiment names no runs.
absl::StatusOr<WarmStart> ReadWarmStart(const v1::ExperimentSpec& spec);

// Records warm (meta "warm_start" and a "warm_start" event at `now`, unix seconds) inside the
// caller's transaction. Nothing is written for an empty warm.
absl::Status RecordWarmStart(const WarmStart& warm, const v1::ExperimentSpec& spec, Store* store,
                             double now);

// The warm start recorded in store, or nullopt when the run has none.
absl::StatusOr<std::optional<WarmStart>> LoadStoredWarmStart(Store* store,
                                                             const v1::ExperimentSpec& spec);

// For `run` and `resume`: the recorded warm start when there is one (a resume), else
// ReadWarmStart(spec), recorded in its own transaction.
absl::StatusOr<WarmStart> PrepareWarmStart(const v1::ExperimentSpec& spec, Store* store,
                                           double now);

// The sampler of a run over its store, for `run`, `resume` and offline ask/tell alike:
// MakeSampler (orchestrator/core/strategy_factory.h) with the priors of PrepareWarmStart. Its
// errors are PrepareWarmStart's and MakeSampler's.
absl::StatusOr<std::unique_ptr<Sampler>> MakeRunSampler(const v1::ExperimentSpec& spec,
                                                        Store* store, double now);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_WARM_START_H_
