#include "orchestrator/simulate/simulate_command.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "common/duration.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/results.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/simulate/simulator.h"

namespace sextant {

// Long because it is the command's whole story: load, catalog, simulate, store, print.
int RunSimulateCommand(const std::string& file, const std::string& run_dir, std::ostream& out,
                       std::ostream& err) {
  LoadResult loaded = LoadExperimentFile(file);
  if (!loaded.ok()) {
    for (const LoadError& e : loaded.errors) err << e.ToString() << "\n";
    return 2;
  }
  v1::ExperimentSpec spec = loaded.spec;
  spec.set_source_path(std::filesystem::absolute(spec.source_path()).string());
  Catalog catalog = Catalog::Default();
  if (!spec.resources().catalog().empty()) {
    std::ifstream in(spec.resources().catalog());
    std::stringstream text;
    text << in.rdbuf();
    std::vector<CatalogError> errors;
    catalog = Catalog::Parse(text.str(), &errors);
    if (!errors.empty()) {
      for (const CatalogError& e : errors) {
        err << spec.resources().catalog() << ":" << e.line << ":" << e.col << ": " << e.message
            << "\n";
      }
      return 2;
    }
  }
  auto sim = Simulator::Create(spec, catalog);
  if (!sim.ok()) {
    err << "sextant: " << sim.status().message() << "\n";
    return 2;
  }
  const std::string dir = run_dir.empty() ? "runs/" + spec.name() + "-sim" : run_dir;
  if (std::filesystem::exists(RunDir::DbPath(dir))) {
    err << "sextant: " << dir << " already holds a run; pick another --run-dir\n";
    return 2;
  }
  auto result = (*sim)->Run();
  if (!result.ok()) {
    err << "sextant: " << result.status().message() << "\n";
    return 1;
  }
  auto lock = RunDir::Acquire(dir);
  if (!lock.ok()) {
    err << "sextant: " << lock.status().message() << "\n";
    return 1;
  }
  auto store = Store::Open(lock->db_path(), /*create=*/true);
  absl::Status written = store.ok() ? (*sim)->WriteTo(store->get()) : store.status();
  if (!written.ok()) {
    err << "sextant: " << written.message() << "\n";
    return 1;
  }
  const SimulationResult& r = *result;
  const std::string currency = spec.budget().currency().empty() ? "USD" : spec.budget().currency();
  out << absl::StrFormat("sextant: simulated %s in %s (%s: %s)\n", spec.name(), dir, r.state,
                         r.message);
  out << absl::StrFormat("cost:        %.2f %s%s\n", r.cost, currency,
                         spec.budget().has_max_cost()
                             ? absl::StrFormat(" of budget %.2f", spec.budget().max_cost())
                             : "");
  for (const PoolSummary& p : r.pools) {
    out << absl::StrFormat("  pool %-16s %-9s %-11s %8.2f %s  %d launched, %d preemptions\n",
                           p.name, p.market, p.region, p.cost, currency, p.launched, p.preemptions);
  }
  out << absl::StrFormat("wall time:   %s (virtual)\n", FormatClock(r.wall_seconds));
  out << absl::StrFormat(
      "preemptions: %d (%d spot interruptions; %.0f instance-seconds of work lost)\n",
      r.preemptions, r.interruptions, r.lost_seconds);
  out << absl::StrFormat("trials:      %d (%d completed), at most %d instances\n", r.trials,
                         r.completed, r.max_live_instances);
  if (r.best_value) {
    out << absl::StrFormat("best value:  %s=%.6g (trial %d)\n", spec.objective().metric(),
                           *r.best_value, r.best_trial);
  } else {
    out << "best value:  none (no trial completed)\n";
  }
  out << absl::StrFormat("simulator:   %d events in %.3f s (%.2f us per event)\n", r.events,
                         r.real_seconds, r.events ? 1e6 * r.real_seconds / r.events : 0.0);
  out << "see: sextant results " << dir << "\n";
  return 0;
}

}  // namespace sextant
