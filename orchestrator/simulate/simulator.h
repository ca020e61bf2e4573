#ifndef SEXTANT_ORCHESTRATOR_SIMULATE_SIMULATOR_H_
#define SEXTANT_ORCHESTRATOR_SIMULATE_SIMULATOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/core/store.h"
#include "orchestrator/cost/catalog.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// Overrides for experiments run side by side (benchmarks, tests); unset = the spec's value.
struct SimulationSettings {
  std::optional<std::string> placement;      // cheapest | spot_first | on_demand | mixed
  std::optional<double> spot_rate_per_day;   // every spot offer's interruption rate
  std::optional<double> notice_seconds;      // every spot offer's notice
  std::optional<double> notice_probability;  // every spot offer's notice probability
};

// One pool's share of a simulated run.
struct PoolSummary {
  std::string name, region, market;
  double cost = 0;
  int launched = 0;
  int preemptions = 0;
};

// What a simulated run did. Times are virtual seconds unless named real.
struct SimulationResult {
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;  // COMPLETED, BUDGET_EXHAUSTED or FAILED
  std::string message;                             // why it ended, for people
  double cost = 0;                                 // the ledger's total
  double wall_seconds = 0;  // virtual time from start to the end of the last instance
  int preemptions = 0;      // attempts ended by a spot interruption
  int interruptions = 0;    // spot instances taken back (busy or idle)
  std::optional<double> best_value;
  int64_t best_trial = 0;
  int trials = 0;
  int completed = 0;
  double lost_seconds = 0;  // instance-seconds of work redone because of preemptions
  // Instance-seconds of work in trials that the run's own stop (budget or wall time) handed
  // back unfinished; never redone, and not counted in lost_seconds.
  double stopped_seconds = 0;
  int max_trials = 0;     // search.max_trials
  int finished = 0;       // trials that ended COMPLETED, PRUNED or FAILED
  int paused = 0;         // unfinished trials waiting at a rung for a promotion
  int cut_off = 0;        // unfinished trials that were running when the run stopped
  int never_started = 0;  // of max_trials, those never run (created or not)
  // Work done, in units of search.fidelity (the highest fidelity each trial reported, summed);
  // without a fidelity, the trials finished.
  double units_done = 0;
  double busy_seconds = 0;  // instance-seconds spent running trials
  int max_live_instances = 0;
  double overshoot_allowance = 0;  // sum of price x increment over the instances ever live
                                   // at once (the documented bound on budget overshoot)
  int64_t events = 0;              // events processed
  double real_seconds = 0;         // host time of the event loop
  std::vector<PoolSummary> pools;
};

// `sextant simulate`: a discrete-event simulation on virtual time (a FakeClock) that drives
// the real sampler and scheduler (orchestrator/core/strategy_factory.h), the cost ledger, the
// budget guard, the placement policy and the autoscaler against the workload model
// (orchestrator/simulate/workload_model.h) and seeded spot interruptions. Deterministic for a
// given spec, catalog and settings. Not thread-safe.
class Simulator {
 public:
  // InvalidArgument when a pool names no catalog offer, no pool is given, or the strategies
  // cannot be built.
  static absl::StatusOr<std::unique_ptr<Simulator>> Create(v1::ExperimentSpec spec, Catalog catalog,
                                                           SimulationSettings settings = {});
  ~Simulator();

  // Runs the experiment to its end. Call once.
  absl::StatusOr<SimulationResult> Run();

  // Writes the run as `sextant run` would (spec and state in meta, trials, attempts,
  // measurements, events) plus the cost rows, in one transaction. After Run().
  absl::Status WriteTo(Store* store) const;

  class Impl;

 private:
  explicit Simulator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SIMULATE_SIMULATOR_H_
