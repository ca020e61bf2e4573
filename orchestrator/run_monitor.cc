#include "orchestrator/run_monitor.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sextant {
namespace {

std::string GoalName(const v1::Objective& o) {
  return o.goal() == v1::Objective::MAXIMIZE ? "maximize" : "minimize";
}

}  // namespace

std::string ObjectiveMetricsLabel(const v1::ExperimentSpec& spec) {
  if (spec.objectives_size() == 0) return spec.objective().metric();
  std::vector<std::string> names;
  for (const v1::Objective& o : spec.objectives()) names.push_back(o.metric());
  return absl::StrJoin(names, ",");
}

absl::StatusOr<std::unique_ptr<RunMonitor>> RunMonitor::Start(int port,
                                                              const v1::ExperimentSpec& spec,
                                                              const std::string& run_dir,
                                                              Clock* clock, std::ostream& out,
                                                              LiveReportOptions report) {
  std::unique_ptr<RunMonitor> m(new RunMonitor(spec, clock));
  m->report_ = std::make_unique<LiveReport>(run_dir, clock, report);
  MetricsHttpOptions http;
  http.page = [r = m->report_.get()] { return r->Page(); };
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Start("127.0.0.1", port, std::move(http));
  if (!server.ok()) return server.status();
  m->server_ = *std::move(server);
  m->Publish(m->Snapshot());
  const std::string base = absl::StrCat("http://127.0.0.1:", m->port(), "/");
  out << "sextant: live report on " << base << " , metrics on " << base << "metrics\n"
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
  server_->Publish(RenderPrometheusText(snapshot));
}

}  // namespace sextant
