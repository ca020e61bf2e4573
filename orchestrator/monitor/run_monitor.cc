#include "orchestrator/monitor/run_monitor.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "orchestrator/core/run_dir.h"

namespace sextant {
namespace {

std::string GoalName(const v1::Objective& o) {
  return o.goal() == v1::Objective::MAXIMIZE ? "maximize" : "minimize";
}

// Heartbeats come every few seconds; a worker silent for longer than this has gone, and its
// last sample must not hold the gauge up.
constexpr double kGpuSampleMaxAgeSeconds = 30;
// The dispatcher writes telemetry to state.db every 5 s; reading it more often finds nothing new.
constexpr absl::Duration kGpuRefresh = absl::Seconds(5);

}  // namespace

std::optional<double> MeanGpuUtilisation(const std::vector<TelemetryRow>& latest, double now,
                                         double max_age_seconds) {
  double sum = 0;
  int workers = 0;
  for (const TelemetryRow& t : latest) {
    if (t.gpu_count <= 0 || now - t.time > max_age_seconds) continue;
    sum += std::clamp(t.gpu_utilization / 100.0, 0.0, 1.0);
    ++workers;
  }
  if (workers == 0) return std::nullopt;
  return sum / workers;
}

std::string ObjectiveMetricsLabel(const v1::ExperimentSpec& spec) {
  if (spec.objectives_size() == 0) return spec.objective().metric();
  std::vector<std::string> names;
  for (const v1::Objective& o : spec.objectives()) names.push_back(o.metric());
  return absl::StrJoin(names, ",");
}

absl::StatusOr<std::unique_ptr<RunMonitor>> RunMonitor::Start(
    int port, const std::string& page_token, const v1::ExperimentSpec& spec,
    const std::string& run_dir, Clock* clock, std::ostream& out, LiveReportOptions report) {
  std::unique_ptr<RunMonitor> m(new RunMonitor(spec, run_dir, clock));
  m->report_ = std::make_unique<LiveReport>(run_dir, clock, report);
  MetricsHttpOptions http;
  http.page = [r = m->report_.get()] { return r->Page(); };
  http.page_token = page_token;
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Start("127.0.0.1", port, clock, std::move(http));
  if (!server.ok()) return server.status();
  m->server_ = *std::move(server);
  m->Publish(m->Snapshot());
  const std::string base = absl::StrCat("http://127.0.0.1:", m->port(), "/");
  out << "sextant: live report on " << base << "?token=" << page_token << " , metrics on " << base
      << "metrics\n"
      << std::flush;
  return m;
}

MetricsSnapshot RunMonitor::Snapshot() const {
  MetricsSnapshot m;
  m.experiment = spec_.name();
  m.metric = ObjectiveMetricsLabel(spec_);
  if (spec_.objectives_size() == 0) {
    m.goal = GoalName(spec_.objective());
  } else {
    std::vector<std::string> goals;
    for (const v1::Objective& o : spec_.objectives()) goals.push_back(GoalName(o));
    m.goal = absl::StrJoin(goals, ",");
  }
  if (!spec_.budget().currency().empty()) m.currency = spec_.budget().currency();
  if (spec_.budget().has_max_cost()) m.budget = spec_.budget().max_cost();
  m.elapsed_seconds = absl::ToDoubleSeconds(clock_->Now() - start_);
  return m;
}

void RunMonitor::Publish(const MetricsSnapshot& snapshot) {
  if (snapshot.gpu_utilisation) {
    server_->Publish(RenderPrometheusText(snapshot));
    return;
  }
  MetricsSnapshot s = snapshot;
  s.gpu_utilisation = GpuUtilisation();
  server_->Publish(RenderPrometheusText(s));
}

std::optional<double> RunMonitor::GpuUtilisation() {
  absl::MutexLock lock(&gpu_mu_);
  const absl::Time now = clock_->Now();
  if (now - gpu_read_at_ < kGpuRefresh) return gpu_utilisation_;
  gpu_read_at_ = now;
  // A read-only connection of its own, closed again: the driver's store is not shared across
  // threads, and an idle reader must not linger on the run's WAL. A store not there yet (the
  // run is being set up) or busy is tried again at the next refresh.
  absl::StatusOr<std::unique_ptr<Store>> store =
      Store::Open(RunDir::DbPath(run_dir_), /*create=*/false, /*read_only=*/true);
  if (!store.ok()) return gpu_utilisation_;
  absl::StatusOr<std::vector<TelemetryRow>> latest = (*store)->LoadTelemetry(/*latest_only=*/true);
  if (!latest.ok()) return gpu_utilisation_;
  gpu_utilisation_ = MeanGpuUtilisation(*latest, absl::ToDoubleSeconds(now - absl::UnixEpoch()),
                                        kGpuSampleMaxAgeSeconds);
  return gpu_utilisation_;
}

}  // namespace sextant
