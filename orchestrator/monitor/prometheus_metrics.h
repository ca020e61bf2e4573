#ifndef SEXTANT_ORCHESTRATOR_MONITOR_PROMETHEUS_METRICS_H_
#define SEXTANT_ORCHESTRATOR_MONITOR_PROMETHEUS_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace sextant {

// What /metrics shows about a run at one moment.
struct MetricsSnapshot {
  std::string experiment;
  std::string metric;                   // the objective's metric name
  std::string goal;                     // minimize | maximize
  std::string currency = "USD";         // default USD
  std::map<std::string, int> by_state;  // missing states are shown as 0
  int max_trials = 0;
  std::optional<double> best_value;  // unset until a trial completes
  int64_t best_trial = 0;
  std::optional<int> front_size;          // several objectives: the Pareto front's size
  std::optional<double> hypervolume;      // and its hypervolume
  double spend = 0;                       // committed spend of billed instances (0 without pools)
  std::optional<double> budget;           // budget.max_cost when set
  int workers = 0;                        // worker processes alive
  int busy_workers = 0;                   // workers running a trial
  std::optional<double> gpu_utilisation;  // mean over workers, in [0, 1], when reported
  std::optional<int> rounds_max;          // federated runs only: federation.rounds
  int rounds_done = 0;                    // federated runs: rounds finished
  // A billed federated run: of spend, the bytes between regions, and its participants' spot
  // instances the market took back. Unset otherwise.
  std::optional<double> transfer_spend;
  std::optional<int> participant_preemptions;
  double elapsed_seconds = 0;
};

// The snapshot in the Prometheus text exposition format (version 0.0.4): every family has
// HELP and TYPE lines, label values are escaped, and each trial state appears (0 when none).
// Families: sextant_run_info, sextant_trials{state}, sextant_trials_max, sextant_best_value,
// sextant_best_trial, sextant_spend, sextant_budget, sextant_workers, sextant_workers_busy,
// sextant_worker_utilisation, sextant_gpu_utilisation, sextant_rounds_done,
// sextant_rounds_max, sextant_spend_by_kind{kind=compute|transfer},
// sextant_participant_preemptions, sextant_elapsed_seconds. Optional ones are left out when
// unset. (A
// gauge may not end in _total, which Prometheus keeps for counters.)
std::string RenderPrometheusText(const MetricsSnapshot& s);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_MONITOR_PROMETHEUS_METRICS_H_
