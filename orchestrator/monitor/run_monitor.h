#ifndef SEXTANT_ORCHESTRATOR_MONITOR_RUN_MONITOR_H_
#define SEXTANT_ORCHESTRATOR_MONITOR_RUN_MONITOR_H_

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "orchestrator/core/store.h"
#include "orchestrator/monitor/live_report.h"
#include "orchestrator/monitor/metrics_http_server.h"
#include "orchestrator/monitor/prometheus_metrics.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// The objective's metric, or the objectives' metrics joined by commas.
std::string ObjectiveMetricsLabel(const v1::ExperimentSpec& spec);

// The mean GPU utilisation, in [0, 1], over the workers whose latest telemetry sample (latest:
// one row per worker, as Store::LoadTelemetry(true) gives) reports a GPU and is at most
// max_age_seconds older than now (unix seconds); each worker counts once, its percentage
// already averaged over its GPUs. nullopt when no worker qualifies.
std::optional<double> MeanGpuUtilisation(const std::vector<TelemetryRow>& latest, double now,
                                         double max_age_seconds);

// What --metrics-port serves while a run goes on, for both run drivers (search and
// federated): the Prometheus text at /metrics and the live HTML report at /, on one loopback
// port. The driver publishes a snapshot as the run moves; the report is read from the run
// directory when a browser asks.
// Thread-safe.
class RunMonitor {
 public:
  // Serves on 127.0.0.1:port (0 picks a free one) and prints both addresses on out, the live
  // report's with ?token=page_token: the page is served only with it (MetricsHttpServer).
  // run_dir holds the run (its spec is stored); clock (not owned) must outlive the monitor.
  // InvalidArgument for a port outside 0..65535, Unavailable when it is taken.
  static absl::StatusOr<std::unique_ptr<RunMonitor>> Start(int port, const std::string& page_token,
                                                           const v1::ExperimentSpec& spec,
                                                           const std::string& run_dir, Clock* clock,
                                                           std::ostream& out,
                                                           LiveReportOptions report = {});

  // A snapshot with what the spec says (experiment, objective metrics and goals, currency,
  // budget) and the seconds since Start; the driver fills in the rest.
  MetricsSnapshot Snapshot() const;
  // Serves the snapshot on /metrics from now on. When the driver left gpu_utilisation unset,
  // it is filled from the run's telemetry (the GPU figures workers send with their
  // heartbeats, which the dispatcher stores every few seconds): MeanGpuUtilisation over
  // samples up to 30 s old, re-read from state.db at most every 5 s. Unset while no worker
  // reports a GPU (a CPU-only or federated run).
  void Publish(const MetricsSnapshot& snapshot);
  // The run has ended (its final state is stored): the live report stops reloading.
  void RunEnded() { report_->RunEnded(); }

  int port() const { return server_->port(); }

 private:
  RunMonitor(const v1::ExperimentSpec& spec, const std::string& run_dir, Clock* clock)
      : spec_(spec), run_dir_(run_dir), clock_(clock) {}

  // The workers' mean GPU utilisation from state.db, cached for a few seconds.
  std::optional<double> GpuUtilisation() ABSL_LOCKS_EXCLUDED(gpu_mu_);

  const v1::ExperimentSpec spec_;
  const std::string run_dir_;
  Clock* const clock_;
  const absl::Time start_ = clock_->Now();
  absl::Mutex gpu_mu_;
  absl::Time gpu_read_at_ ABSL_GUARDED_BY(gpu_mu_) = absl::InfinitePast();
  std::optional<double> gpu_utilisation_ ABSL_GUARDED_BY(gpu_mu_);
  std::unique_ptr<LiveReport> report_;
  std::unique_ptr<MetricsHttpServer> server_;  // last: stopped before the report goes
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_MONITOR_RUN_MONITOR_H_
