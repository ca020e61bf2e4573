#include "orchestrator/simulate/simulate_command.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/duration.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/federated_results.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/core/results.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/federated/global_evaluator.h"
#include "orchestrator/simulate/federated_forecast.h"
#include "orchestrator/simulate/run_timing.h"
#include "orchestrator/simulate/simulator.h"

namespace sextant {
namespace {

// The fidelity units a whole search of max_trials takes, and whether that is only a bound:
// successive halving's budget under ASHA's promotion mode (a promoted trial resumes from its
// checkpoint), every trial to fidelity.max under another scheduler (a bound: it stops some
// early) or none, and one unit per trial without a fidelity.
std::pair<double, bool> PlannedUnits(const v1::Search& s) {
  const v1::Fidelity& f = s.fidelity();
  if (!s.has_fidelity() || f.max() <= 0) return {s.max_trials(), false};
  const bool scheduled =
      s.scheduler() != v1::Search::NONE && s.scheduler() != v1::Search::SCHEDULER_UNSPECIFIED;
  if (s.scheduler() != v1::Search::ASHA || s.asha_mode() == "stopping" ||
      f.reduction_factor() <= 1 || f.min() <= 0) {
    return {s.max_trials() * f.max(), scheduled};
  }
  double units = 0, done = 0, rung = f.min(), n = s.max_trials();
  while (n >= 1) {
    rung = std::min(rung, f.max());
    units += n * (rung - done);
    if (rung >= f.max()) break;
    done = rung;
    rung *= f.reduction_factor();
    n = std::floor(n / f.reduction_factor());
  }
  return {units, false};
}

// What a run that stopped early left undone (its trials not finished, by why) and what the
// whole search would have cost at the cost per unit of work so far.
std::string Unfinished(const v1::ExperimentSpec& spec, const SimulationResult& r,
                       const std::string& currency) {
  if (r.state == v1::RUN_COMPLETED || r.finished >= r.max_trials) return "";
  std::string out = absl::StrFormat(
      "not finished: %d of the %d trials (%d paused at a rung, %d cut off by the run's end, %d "
      "never started; %.0f instance-seconds of work handed back at the end)\n",
      r.max_trials - r.finished, r.max_trials, r.paused, r.cut_off, r.never_started,
      r.stopped_seconds);
  if (r.units_done <= 0) {
    return out + "projection:  none (no work finished to take a cost per unit from)\n";
  }
  const auto [planned, bound] = PlannedUnits(spec.search());
  const bool fidelity = spec.search().has_fidelity() && spec.search().fidelity().max() > 0;
  const std::string unit = fidelity ? spec.search().fidelity().name() : "finished trial";
  const double each = r.cost / r.units_done;
  return out + absl::StrFormat(
                   "projection:  all %d trials would cost %s %.2f %s (%.0f %s%s at %.4g %s per "
                   "%s so far, %.0f done)\n",
                   r.max_trials, bound ? "at most about" : "about", each * planned, currency,
                   planned, unit, fidelity ? " units" : "s", each, currency, unit, r.units_done);
}

// The model's weights: the declared layout of a model of the user's own, else what the built-in
// trainer's evaluator (the one a run starts) reports as its initial model.
absl::StatusOr<int64_t> ModelParameters(const v1::ExperimentSpec& spec,
                                        const std::string& worker_binary) {
  const v1::Federation& fed = spec.federation();
  if (fed.model_layout_size() > 0) {
    int64_t n = 0;
    for (const v1::TensorLayout& t : fed.model_layout()) {
      int64_t elements = 1;
      for (int64_t d : t.shape()) elements *= d;
      n += elements;
    }
    return n;
  }
  std::error_code ec;
  std::string pattern = (std::filesystem::temp_directory_path(ec) / "sextant-forecast.XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make a scratch folder like ", pattern));
  }
  const std::string dir = pattern;
  std::ofstream(dir + "/spec.pb", std::ios::binary) << spec.SerializeAsString();
  std::unique_ptr<ProcessLauncher> launcher = NewPosixProcessLauncher();
  absl::StatusOr<std::unique_ptr<GlobalEvaluator>> evaluator =
      GlobalEvaluator::Start(launcher.get(),
                             {worker_binary, "--role", "evaluator", "--spec", dir + "/spec.pb",
                              "--work-dir", dir + "/eval", "--threads", "1", "--exit-with-parent"},
                             dir + "/eval", dir + "/evaluator.log", absl::Seconds(120));
  absl::StatusOr<int64_t> n =
      evaluator.ok()
          ? absl::StatusOr<int64_t>(static_cast<int64_t>((*evaluator)->initial_weights().size()))
          : evaluator.status();
  evaluator = nullptr;  // stops the process before its folder goes
  std::filesystem::remove_all(dir, ec);
  return n;
}

// `sextant simulate` of a plain federated run: its rounds' dollars and time (ForecastFederatedRun)
// printed, nothing stored.
int ForecastCommand(v1::ExperimentSpec spec, const Catalog& catalog, const SimulateOptions& options,
                    std::ostream& out, std::ostream& err) {
  for (const auto& [region, market] : options.markets) {
    bool found = false;
    for (v1::Pool& p : *spec.mutable_resources()->mutable_pools()) {
      if (p.region() != region) continue;
      p.set_market(market == "spot" ? v1::Pool::SPOT : v1::Pool::ON_DEMAND);
      found = true;
    }
    if (!found) {
      err << "sextant: --market " << region << "=" << market << ": no pool is in region " << region
          << "\n";
      return 2;
    }
  }
  if (!options.global_region.empty()) {
    spec.mutable_federation()->set_global_region(options.global_region);
  }
  absl::StatusOr<int64_t> parameters = ModelParameters(spec, options.worker_binary);
  if (!parameters.ok()) {
    err << "sextant: the model's size: " << parameters.status().message() << "\n";
    return 1;
  }
  std::optional<RunTiming> measured;
  if (!options.calibrate_run_dir.empty()) {
    absl::StatusOr<RunTiming> t = MeasureRunTiming(options.calibrate_run_dir);
    if (!t.ok()) {
      err << "sextant: --calibrate " << t.status().message() << "\n";
      return 2;
    }
    measured = *t;
  }
  absl::StatusOr<FederatedForecast> f = ForecastFederatedRun(
      spec, catalog, *parameters, options.time_scale, measured ? &*measured : nullptr);
  if (!f.ok()) {
    err << "sextant: " << f.status().message() << "\n";
    return 2;
  }
  const std::string currency = spec.budget().currency().empty() ? "USD" : spec.budget().currency();
  const v1::Simulation& sim = spec.simulate();
  const std::string global = spec.federation().global_region().empty()
                                 ? spec.federation().regions(0).name()
                                 : spec.federation().global_region();
  if (measured) {
    out << absl::StrFormat(
        "sextant: forecast of the federated run %s: %d regions, %d parameters, %d rounds of %gs "
        "after a start-up of %gs, as %s measured them (median of %d rounds), global region %s\n",
        spec.name(), spec.federation().regions_size(), *parameters, spec.federation().rounds(),
        measured->round_seconds, measured->startup_seconds, options.calibrate_run_dir,
        measured->gaps, global);
  } else {
    out << absl::StrFormat(
        "sextant: forecast of the federated run %s: %d regions, %d parameters, %d rounds of %gs "
        "training (simulate.client_seconds) over %g Mbit/s links (simulate.link_mbps), global "
        "region %s\n",
        spec.name(), spec.federation().regions_size(), *parameters, spec.federation().rounds(),
        sim.client_seconds() > 0 ? sim.client_seconds() : 5.0,
        sim.link_mbps() > 0 ? sim.link_mbps() : 100.0, global);
  }
  out << " round   closes at    compute   transfer\n";
  for (const RoundForecast& r : f->rounds) {
    out << absl::StrFormat("%6d  %10s  %9.4f  %9.6f%s\n", r.round, FormatClock(r.close_seconds),
                           r.compute, r.transfer,
                           r.waited_out ? "  waits for a participant taken back" : "");
  }
  out << absl::StrFormat("cost:        %.4f %s (compute %.4f, transfer %.6f)%s\n", f->total,
                         currency, f->compute, f->transfer,
                         spec.budget().has_max_cost()
                             ? absl::StrFormat(" of budget %.2f", spec.budget().max_cost())
                             : "");
  for (const auto& [pool, cost] : f->by_pool) {
    out << absl::StrFormat("  pool %-16s %9.4f %s\n", pool, cost, currency);
  }
  out << absl::StrFormat("transfer:    %d bytes a round between the regions and the global one\n",
                         f->bytes_per_round);
  out << absl::StrFormat(
      "spot:        %d participants taken back by this seed's market (%.2f on average over "
      "seeds)\n",
      f->preemptions, f->expected_preemptions);
  out << absl::StrFormat("wall time:   %s\n", FormatClock(f->wall_seconds));
  if (f->rounds_within_budget < spec.federation().rounds()) {
    out << absl::StrFormat("budget:      the run stops after round %d of %d (BUDGET_EXHAUSTED)\n",
                           f->rounds_within_budget, spec.federation().rounds());
  }
  return 0;
}

}  // namespace

// Long because it is the command's whole story: load, catalog, simulate, store, print.
int RunSimulateCommand(const std::string& file, const SimulateOptions& options, std::ostream& out,
                       std::ostream& err) {
  const std::string& run_dir = options.run_dir;
  LoadResult loaded = LoadExperimentFile(file);
  if (!loaded.ok()) {
    for (const LoadError& e : loaded.errors) err << e.ToString() << "\n";
    return 2;
  }
  v1::ExperimentSpec spec = loaded.spec;
  spec.set_source_path(std::filesystem::absolute(spec.source_path()).string());
  std::vector<CatalogError> errors;
  absl::StatusOr<Catalog> catalog = LoadCatalog(spec.resources().catalog(), &errors);
  for (const CatalogError& e : errors) {
    err << spec.resources().catalog() << ":" << e.line << ":" << e.col << ": " << e.message << "\n";
  }
  if (!catalog.ok()) {
    if (errors.empty()) err << "sextant: " << catalog.status().message() << "\n";
    return 2;
  }
  // The simulator plays a search's trials; a plain federated run is forecast by rounds.
  if (IsFederatedRun(spec)) return ForecastCommand(spec, *catalog, options, out, err);
  for (const auto& [flag, set] :
       {std::pair<const char*, bool>{"--market", !options.markets.empty()},
        {"--global-region", !options.global_region.empty()},
        {"--calibrate", !options.calibrate_run_dir.empty()}}) {
    if (set) {
      err << "sextant: " << flag << " applies to a plain federated run's forecast; " << file
          << " is a search\n";
      return 2;
    }
  }
  auto sim = Simulator::Create(spec, *std::move(catalog));
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
  out << absl::StrFormat("sextant: simulated %s in %s (%s: %s)\n", spec.name(), dir,
                         RunStateName(r.state), r.message);
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
      "preemptions: %d (%d spot interruptions; %.0f instance-seconds of work redone)\n",
      r.preemptions, r.interruptions, r.lost_seconds);
  out << absl::StrFormat("trials:      %d (%d completed), at most %d instances\n", r.trials,
                         r.completed, r.max_live_instances);
  out << Unfinished(spec, r, currency);
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
