#include "orchestrator/core/results.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/exact_number.h"
#include "common/status_macros.h"
#include "orchestrator/core/federated_results.h"
#include "orchestrator/core/fleet_meta.h"
#include "orchestrator/core/objectives.h"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/warm_start.h"
#include "sextant/v1/experiment.pb.h"
#include "strategies/pareto.h"

namespace sextant {
namespace {

// {"total": n, "by_trial": {id: n}, "by_pool": {pool: n}}: trials count the attempts that a
// preemption notice ended; pools count the trials running on their instances when the market
// took them back (meta "fleet", written by the live fleet and by `sextant simulate`).
nlohmann::json PreemptionCounts(const std::vector<TrialRow>& trials,
                                const std::optional<std::string>& fleet) {
  nlohmann::json out = {
      {"total", 0}, {"by_trial", nlohmann::json::object()}, {"by_pool", nlohmann::json::object()}};
  int total = 0;
  for (const TrialRow& t : trials) {
    total += t.preemptions;
    if (t.preemptions > 0) out["by_trial"][absl::StrCat(t.id)] = t.preemptions;
  }
  out["total"] = total;
  if (!fleet) return out;
  for (const auto& [name, p] : PoolsFromFleetMeta(*fleet)) out["by_pool"][name] = p.preemptions;
  return out;
}

std::string Scalar(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return ExactNumber(v.get<double>());  // round-trip exact, as JSON
  return v.dump();
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Adds up the fidelity each trial actually trained: an attempt that resumed from its
// checkpoint (its first report is past the trial's previous maximum) counts from there; an
// attempt that started over counts from zero.
class FidelityCount {
 public:
  void Add(int64_t trial, int attempt, double fidelity) {
    Span& s = spans_[trial];
    if (attempt != s.attempt) {
      total_ += s.max - s.start;
      s.start = fidelity > s.max ? s.max : 0;
      s.attempt = attempt;
    }
    s.max = std::max(s.max, fidelity);
  }
  double total() const {
    double t = total_;
    for (const auto& [trial, s] : spans_) t += s.max - s.start;
    return t;
  }

 private:
  struct Span {
    int attempt = 0;
    double start = 0, max = 0;
  };
  std::map<int64_t, Span> spans_;
  double total_ = 0;
};

// The minimised values of a trial that may enter the front: COMPLETED, feasible, and with a
// finite value for every objective.
std::optional<std::vector<double>> FrontCandidate(const ObjectiveSet& objectives,
                                                  const TrialRow& t) {
  if (t.state != v1::COMPLETED || !t.feasible ||
      t.values.size() != static_cast<size_t>(objectives.size())) {
    return std::nullopt;
  }
  for (double v : t.values) {
    if (!std::isfinite(v)) return std::nullopt;
  }
  return objectives.Minimised(t.values);
}

// "pareto", "hypervolume", "reference_point" and "hypervolume_history" (after each trial, in
// id order, with the dollars spent on trials so far) of a run with several objectives.
void AddParetoFront(const ObjectiveSet& objectives, const std::vector<TrialRow>& trials,
                    const std::map<int64_t, double>& trial_cost, nlohmann::json* doc) {
  std::vector<std::vector<double>> points;
  std::vector<const TrialRow*> owners;
  for (const TrialRow& t : trials) {
    if (std::optional<std::vector<double>> p = FrontCandidate(objectives, t)) {
      points.push_back(*std::move(p));
      owners.push_back(&t);
    }
  }
  bool derived = false;
  const std::vector<double> ref = ReferencePoint(objectives, points, &derived);
  nlohmann::json pareto = nlohmann::json::array();
  for (int i : ParetoFront(points)) {
    pareto.push_back({{"trial", owners[i]->id},
                      {"values", owners[i]->values},
                      {"params", nlohmann::json::parse(owners[i]->params_json, nullptr, false)}});
  }
  (*doc)["pareto"] = std::move(pareto);
  const double hv = Hypervolume(points, ref);
  (*doc)["hypervolume"] = hv;
  nlohmann::json reference = nlohmann::json::array();
  for (int i = 0; i < objectives.size(); ++i) {
    const bool maximize = objectives.objectives()[i].goal() == v1::Objective::MAXIMIZE;
    reference.push_back(maximize ? -ref[i] : ref[i]);
  }
  (*doc)["reference_point"] = std::move(reference);
  (*doc)["reference_point_source"] = derived ? "derived" : "given";
  if (points.empty()) {
    (*doc)["hypervolume_note"] = "no trial is completed, feasible and valued in every objective";
  } else if (hv == 0) {
    (*doc)["hypervolume_note"] =
        "no feasible trial dominates the reference point (each must be better than it in every "
        "objective); set objectives[].reference to a worse point";
  }
  // Hypervolume after each trial, recomputed only when a trial joins the front.
  nlohmann::json history = nlohmann::json::array();
  std::vector<std::vector<double>> front;
  double current = 0, spent = 0;
  size_t next = 0;
  for (const TrialRow& t : trials) {
    if (auto c = trial_cost.find(t.id); c != trial_cost.end()) spent += c->second;
    if (next < owners.size() && owners[next] == &t) {
      const std::vector<double>& p = points[next++];
      bool dominated = false;
      for (const std::vector<double>& f : front) dominated |= (f == p) || Dominates(f, p);
      if (!dominated) {
        std::erase_if(front, [&](const std::vector<double>& f) { return Dominates(p, f); });
        front.push_back(p);
        current = Hypervolume(front, ref);
      }
    }
    history.push_back({{"trial", t.id}, {"hypervolume", current}, {"cost", spent}});
  }
  (*doc)["hypervolume_history"] = std::move(history);
}

// The run's experiment, as stored when it started.
absl::StatusOr<v1::ExperimentSpec> LoadSpec(Store& store, const std::string& run_dir) {
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> spec_bytes, store.GetMeta("spec"));
  v1::ExperimentSpec spec;
  if (!spec_bytes || !spec.ParseFromString(*spec_bytes)) {
    return absl::NotFoundError(absl::StrCat(run_dir, ": not a Sextant run directory (no spec)"));
  }
  return spec;
}

// What the records beside the trials table hold of each trial, by trial id.
struct TrialRecords {
  std::map<int64_t, nlohmann::json> metrics;  // the last value reported of each metric
  std::map<int64_t, nlohmann::json> events;   // [{"time", "kind", "message"}], oldest first
  std::map<int64_t, double> cost;             // dollars: the cost ledger's "trial" rows
  FidelityCount consumed;                     // the fidelity trained, over all trials
};

TrialRecords GatherTrialRecords(const std::vector<MeasurementRow>& ms,
                                const std::vector<EventRow>& events,
                                const std::vector<CostRow>& costs,
                                const std::string& fidelity_key) {
  TrialRecords out;
  for (const CostRow& c : costs) {
    if (c.kind == "trial") out.cost[c.ref] += c.cost;
  }
  for (const EventRow& e : events) {
    if (e.trial_id == 0) continue;
    out.events[e.trial_id].push_back({{"time", e.time}, {"kind", e.kind}, {"message", e.message}});
  }
  for (const MeasurementRow& m : ms) {
    nlohmann::json j = nlohmann::json::parse(m.metrics_json, nullptr, false);
    if (!j.is_object()) continue;
    nlohmann::json& into = out.metrics[m.trial_id];
    if (!into.is_object()) into = nlohmann::json::object();
    for (auto& [k, v] : j.items()) into[k] = v;
    if (!fidelity_key.empty() && j.contains(fidelity_key) && j[fidelity_key].is_number()) {
      out.consumed.Add(m.trial_id, m.attempt, j[fidelity_key].get<double>());
    }
  }
  return out;
}

// "privacy", "client_selection" and "model_file": what a federated run stores beside its
// state. One that is absent or unreadable is left out.
void AddFederatedMeta(Store& store, nlohmann::json* doc) {
  // A federated run with differential privacy: the cumulative (epsilon, delta) so far.
  if (absl::StatusOr<std::optional<std::string>> privacy = store.GetMeta("privacy");
      privacy.ok() && *privacy) {
    nlohmann::json p = nlohmann::json::parse(**privacy, nullptr, false);
    if (p.is_object()) (*doc)["privacy"] = p;
  }
  // A federated run's client selection: the policy, rounds per client, seconds per client.
  if (absl::StatusOr<std::optional<std::string>> sel = store.GetMeta("client_selection");
      sel.ok() && *sel) {
    nlohmann::json p = nlohmann::json::parse(**sel, nullptr, false);
    if (p.is_object()) (*doc)["client_selection"] = p;
  }
  // A federated run: the newest global model file (RUN_DIR/model/*.safetensors).
  if (absl::StatusOr<std::optional<std::string>> model = store.GetMeta("model_file");
      model.ok() && *model) {
    (*doc)["model_file"] = **model;
  }
}

// "objective" (null with several objectives, which "objectives" then lists) and, when the
// experiment has any, "constraints".
void AddObjectives(const v1::ExperimentSpec& spec, const ObjectiveSet& objectives,
                   nlohmann::json* doc) {
  const bool maximize = spec.objective().goal() == v1::Objective::MAXIMIZE;
  if (objectives.multi()) {
    (*doc)["objective"] = nullptr;
    (*doc)["objectives"] = nlohmann::json::array();
    for (const v1::Objective& o : objectives.objectives()) {
      (*doc)["objectives"].push_back(
          {{"metric", o.metric()},
           {"goal", o.goal() == v1::Objective::MAXIMIZE ? "maximize" : "minimize"}});
    }
  } else {
    (*doc)["objective"] = {{"metric", spec.objective().metric()},
                           {"goal", maximize ? "maximize" : "minimize"}};
  }
  if (!objectives.constraints().empty()) {
    (*doc)["constraints"] = nlohmann::json::array();
    for (const v1::Constraint& c : objectives.constraints()) {
      nlohmann::json j = {{"metric", c.metric()}};
      if (c.has_max()) j["max"] = c.max();
      if (c.has_min()) j["min"] = c.min();
      (*doc)["constraints"].push_back(std::move(j));
    }
  }
}

// One entry of "trials".
nlohmann::json TrialJson(const v1::ExperimentSpec& spec, bool multi, const TrialRow& t,
                         const TrialRecords& records) {
  const std::string& fidelity_key = spec.search().fidelity().name();
  nlohmann::json row;
  row["id"] = t.id;
  row["state"] = TrialStateName(t.state);
  row["params"] = nlohmann::json::parse(t.params_json, nullptr, false);
  row["value"] = t.value ? nlohmann::json(*t.value) : nlohmann::json(nullptr);
  row["values"] = nlohmann::json::array();
  if (multi) {
    for (double v : t.values)
      row["values"].push_back(std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr));
  } else if (t.value) {
    row["values"].push_back(*t.value);
  }
  row["feasible"] = t.feasible;
  auto metrics = records.metrics.find(t.id);
  nlohmann::json m = metrics != records.metrics.end() ? metrics->second : nlohmann::json::object();
  row["fidelity"] = nullptr;
  if (t.fidelity > 0) {
    row["fidelity"] = t.fidelity;
  } else if (!fidelity_key.empty() && m.contains(fidelity_key) && m[fidelity_key].is_number()) {
    row["fidelity"] = m[fidelity_key];
  }
  if (spec.search().scheduler() != v1::Search::NONE &&
      spec.search().scheduler() != v1::Search::SCHEDULER_UNSPECIFIED) {
    row["rungs"] = nlohmann::json::parse(t.rungs_json, nullptr, false);
    row["restarts_from_scratch"] = t.scratch_restarts;
  }
  row["metrics"] = std::move(m);
  row["attempts"] = t.attempts;
  row["preemptions"] = t.preemptions;
  auto events = records.events.find(t.id);
  row["events"] = events != records.events.end() ? events->second : nlohmann::json::array();
  auto cost = records.cost.find(t.id);
  row["cost"] = cost != records.cost.end() ? cost->second : 0.0;
  row["trial_seconds"] = t.seconds;
  row["error"] = t.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.error);
  return row;
}

// A run with one objective: its best feasible COMPLETED trial, the first of equals. nullptr
// when there is none, and with several objectives (the Pareto front stands in for it).
const TrialRow* BestTrial(const std::vector<TrialRow>& trials, bool multi, bool maximize) {
  const TrialRow* best = nullptr;
  for (const TrialRow& t : trials) {
    if (!multi && t.state == v1::COMPLETED && t.value && t.feasible &&
        (!best || (maximize ? *t.value > *best->value : *t.value < *best->value))) {
      best = &t;
    }
  }
  return best;
}

// "cost": the total of instances, reservations and transfer, split into compute and transfer,
// by pool (transfer as pool "transfer") and by region (trial rows attribute that same money
// to trials, so they are not added again), and the budget.
void AddCost(const v1::ExperimentSpec& spec, const std::vector<CostRow>& costs,
             nlohmann::json* doc) {
  std::string currency = spec.budget().currency().empty() ? "USD" : spec.budget().currency();
  nlohmann::json& out = (*doc)["cost"];
  out = {{"total", 0.0}, {"currency", currency}, {"by_pool", nlohmann::json::object()}};
  double total = 0, transfer = 0;
  for (const CostRow& c : costs) {
    if (c.kind == "trial") continue;
    total += c.cost;
    if (c.kind == "transfer") transfer += c.cost;
    nlohmann::json& pool = out["by_pool"][c.pool];
    pool = (pool.is_number() ? pool.get<double>() : 0.0) + c.cost;
    if (!out.contains("by_region")) out["by_region"] = nlohmann::json::object();
    nlohmann::json& region = out["by_region"][c.region];
    region = (region.is_number() ? region.get<double>() : 0.0) + c.cost;
  }
  out["total"] = total;
  out["compute"] = total - transfer;  // instances and reservations
  out["transfer"] = transfer;         // bytes between regions (federated runs)
  if (spec.budget().has_max_cost()) out["budget"] = spec.budget().max_cost();
}

// A federated run: its rounds ("rounds", "federation"). A federated search: each trial's
// rounds, read from the federated run the trial holds.
absl::Status AddFederation(const v1::ExperimentSpec& spec, const std::string& run_dir,
                           const std::vector<CostRow>& costs, nlohmann::json* doc) {
  if (IsFederatedRun(spec)) {
    SEXTANT_ASSIGN_OR_RETURN(RoundsTable table, RoundsTable::OpenReadOnly(RunDir::DbPath(run_dir)));
    SEXTANT_ASSIGN_OR_RETURN(std::vector<RoundRow> rounds, table.Load());
    AddFederatedRounds(spec, rounds, costs, doc);
  } else if (spec.has_federation()) {
    // A federated search: each trial is a federated run of its own, in its checkpoint folder
    // (trial_command.cc); a trial that has not started one yet has no rounds.
    (*doc)["federation"] = {{"description", DescribeFederation(spec)}};
    for (nlohmann::json& row : (*doc)["trials"]) {
      const std::string inner = RunDir::FederatedTrialDir(run_dir, row["id"].get<int64_t>());
      if (!std::filesystem::exists(RunDir::DbPath(inner))) continue;
      absl::StatusOr<nlohmann::json> trial_results = LoadResults(inner);
      if (trial_results.ok() && trial_results->contains("rounds")) {
        row["rounds"] = std::move((*trial_results)["rounds"]);
      }
      if (trial_results.ok() && trial_results->contains("privacy")) {
        row["privacy"] = std::move((*trial_results)["privacy"]);
      }
    }
    if (spec.federation().has_dp()) (*doc)["privacy"] = StudyPrivacy(spec, (*doc)["trials"]);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> LoadResults(const std::string& run_dir) {
  SEXTANT_ASSIGN_OR_RETURN(auto store, Store::Open(RunDir::DbPath(run_dir), /*create=*/false,
                                                   /*read_only=*/true));
  SEXTANT_ASSIGN_OR_RETURN(const v1::ExperimentSpec spec, LoadSpec(*store, run_dir));
  SEXTANT_ASSIGN_OR_RETURN(const v1::RunState state, store->GetRunState());
  SEXTANT_ASSIGN_OR_RETURN(std::vector<TrialRow> trials, store->LoadTrials());
  SEXTANT_ASSIGN_OR_RETURN(std::vector<MeasurementRow> ms, store->LoadMeasurements());
  SEXTANT_ASSIGN_OR_RETURN(std::vector<EventRow> events, store->LoadEvents());
  // Run directories from before the costs table have no cost rows: all costs read as 0.
  std::vector<CostRow> costs = store->LoadCosts().value_or(std::vector<CostRow>());
  const std::string& fidelity_key = spec.search().fidelity().name();
  const TrialRecords records = GatherTrialRecords(ms, events, costs, fidelity_key);

  nlohmann::json doc;
  doc["experiment"] = spec.name();
  doc["state"] = RunStateName(state);
  // The cap as it holds now (resume --max-trials changes it).
  const bool one_federated_run = spec.has_federation() && spec.parameters_size() == 0;
  if (!one_federated_run) doc["max_trials"] = spec.search().max_trials();
  AddFederatedMeta(*store, &doc);
  const ObjectiveSet objectives(spec);
  AddObjectives(spec, objectives, &doc);
  doc["best"] = nullptr;
  doc["trials"] = nlohmann::json::array();
  for (const TrialRow& t : trials) {
    doc["trials"].push_back(TrialJson(spec, objectives.multi(), t, records));
  }
  const bool maximize = spec.objective().goal() == v1::Objective::MAXIMIZE;
  if (const TrialRow* best = BestTrial(trials, objectives.multi(), maximize)) {
    doc["best"] = {{"trial", best->id},
                   {"value", *best->value},
                   {"params", nlohmann::json::parse(best->params_json, nullptr, false)}};
  }
  if (objectives.multi()) AddParetoFront(objectives, trials, records.cost, &doc);
  if (!fidelity_key.empty()) doc["fidelity_consumed"] = records.consumed.total();
  AddCost(spec, costs, &doc);
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> fleet, store->GetMeta("fleet"));
  doc["preemptions"] = PreemptionCounts(trials, fleet);
  SEXTANT_ASSIGN_OR_RETURN(std::optional<WarmStart> warm, LoadStoredWarmStart(store.get(), spec));
  if (warm) {
    doc["warm_start"] = {{"observations", warm->trials.size()},
                         {"from", warm->from},
                         {"dropped", warm->dropped_count()}};
  }
  SEXTANT_RETURN_IF_ERROR(AddFederation(spec, run_dir, costs, &doc));
  return doc;
}

std::string ResultsToCsv(const nlohmann::json& results) {
  if (results.contains("rounds")) return FederatedRoundsToCsv(results);
  std::set<std::string> param_names, metric_names;
  for (const auto& t : results["trials"]) {
    for (auto& [k, v] : t["params"].items()) param_names.insert(k);
    for (auto& [k, v] : t["metrics"].items()) metric_names.insert(k);
  }
  std::vector<std::string> objective_names;
  if (results.contains("objectives")) {
    for (const auto& o : results["objectives"])
      objective_names.push_back(o["metric"].get<std::string>());
  }
  std::vector<std::string> header = {"id",       "state", "value",   "attempts",
                                     "fidelity", "cost",  "feasible"};
  for (const auto& o : objective_names) header.push_back("value." + o);
  for (const auto& p : param_names) header.push_back("param." + p);
  for (const auto& m : metric_names) header.push_back("metric." + m);
  header.push_back("error");
  std::string out = absl::StrJoin(header, ",") + "\n";
  for (const auto& t : results["trials"]) {
    std::vector<std::string> row = {Scalar(t["id"]),
                                    Scalar(t["state"]),
                                    Scalar(t["value"]),
                                    Scalar(t["attempts"]),
                                    Scalar(t["fidelity"]),
                                    Scalar(t["cost"]),
                                    Scalar(t.value("feasible", nlohmann::json(true)))};
    for (size_t i = 0; i < objective_names.size(); ++i) {
      const bool has = t.contains("values") && t["values"].is_array() && i < t["values"].size();
      row.push_back(has ? Scalar(t["values"][i]) : "");
    }
    for (const auto& p : param_names)
      row.push_back(t["params"].contains(p) ? Scalar(t["params"][p]) : "");
    for (const auto& m : metric_names)
      row.push_back(t["metrics"].contains(m) ? Scalar(t["metrics"][m]) : "");
    row.push_back(Scalar(t["error"]));
    for (auto& f : row) f = CsvField(f);
    out += absl::StrJoin(row, ",") + "\n";
  }
  return out;
}

namespace {

// The objective's metric, or the objectives' metrics joined by commas.
std::string MetricLabel(const nlohmann::json& results) {
  if (!results.contains("objectives")) return results["objective"]["metric"].get<std::string>();
  std::vector<std::string> names;
  for (const auto& o : results["objectives"]) names.push_back(o["metric"].get<std::string>());
  return absl::StrJoin(names, ",");
}

// "experiment NAME (STATE): ..." with the trials by state, or a federated run's rounds.
void WriteRunLine(const nlohmann::json& results, std::ostream& os) {
  std::map<std::string, int> counts;
  for (const auto& t : results["trials"]) ++counts[t["state"].get<std::string>()];
  std::vector<std::string> parts;
  for (const auto& [state, n] : counts) parts.push_back(absl::StrCat(n, " ", state));
  os << "experiment " << Scalar(results["experiment"]) << " (" << Scalar(results["state"]) << "): ";
  if (results.contains("rounds")) {
    const nlohmann::json& f = results["federation"];
    os << Scalar(f["description"]) << "; " << Scalar(f["rounds_completed"]) << " of "
       << Scalar(f["rounds_planned"]) << " rounds done\n";
  } else {
    os << results["trials"].size() << " trials";
    if (results.contains("max_trials")) os << " of max_trials " << Scalar(results["max_trials"]);
    os << (parts.empty() ? "" : ", " + absl::StrJoin(parts, ", ")) << "\n";
  }
  if (results.contains("warm_start")) {
    const nlohmann::json& w = results["warm_start"];
    os << "warm start: " << Scalar(w["observations"]) << " prior observations from "
       << absl::StrJoin(w["from"].get<std::vector<std::string>>(), ", ") << "\n";
  }
}

// The best trial (a federated run's final global model), or the Pareto front.
void WriteBest(const nlohmann::json& results, const std::string& metric, std::ostream& os) {
  if (results.contains("rounds") && !results["best"].is_null()) {
    os << "final global model: " << metric << "=" << Scalar(results["best"]["value"]) << "\n";
  } else if (!results["best"].is_null()) {
    os << "best: trial " << Scalar(results["best"]["trial"]) << "  " << metric << "="
       << Scalar(results["best"]["value"]) << "  " << results["best"]["params"].dump() << "\n";
  }
  if (results.contains("objectives") && results.contains("pareto")) {
    os << "pareto front: " << results["pareto"].size() << " trials (";
    std::vector<std::string> ids;
    for (const auto& p : results["pareto"]) ids.push_back(Scalar(p["trial"]));
    os << absl::StrJoin(ids, ", ") << "), hypervolume " << Scalar(results["hypervolume"])
       << " (reference point " << results["reference_point"].dump() << ", "
       << Scalar(results["reference_point_source"]) << ")\n";
    if (results.contains("hypervolume_note"))
      os << "  " << Scalar(results["hypervolume_note"]) << "\n";
  }
}

// The privacy spent: a federated run's epsilon, or what a federated search spent on the same
// clients over all its trials; nothing without DP.
void WritePrivacy(const nlohmann::json& results, std::ostream& os) {
  if (!results.contains("privacy") || !results["privacy"].is_object()) return;
  const nlohmann::json& p = results["privacy"];
  if (p.contains("study_epsilon") && p.value("method", "") == "random_stopping") {
    os << absl::StrFormat(
        "privacy: the study spent epsilon %.4g at delta %g (random stopping: %d trials drawn, "
        "%.4g expected; only the best trial's model is released; composition would say %.4g)\n",
        p["study_epsilon"].get<double>(), p["delta"].get<double>(),
        p["trials_drawn"].get<int64_t>(), p["mean_trials"].get<double>(),
        p["composition_epsilon"].get<double>());
  } else if (p.contains("study_epsilon")) {
    os << absl::StrFormat(
        "privacy: the study spent epsilon %.4g at delta %g (RDP composition over %d rounds of %d "
        "trials on the same clients)\n",
        p["study_epsilon"].get<double>(), p["delta"].get<double>(), p["rounds"].get<int64_t>(),
        static_cast<int>(p["per_trial"].size()));
  } else if (p["epsilon"].is_number()) {
    os << absl::StrFormat("privacy: epsilon %.4g at delta %g after %d rounds\n",
                          p["epsilon"].get<double>(), p["delta"].get<double>(),
                          p["rounds"].get<int64_t>());
  }
}

// What the run cost and what the market took back; nothing when it cost nothing and lost no
// trial to a preemption.
void WriteCostAndPreemptions(const nlohmann::json& results, std::ostream& os) {
  if (results.contains("cost") && results["cost"]["total"].is_number() &&
      results["cost"]["total"].get<double>() > 0) {
    const nlohmann::json& cost = results["cost"];
    os << absl::StrFormat("cost: %.2f %s", cost["total"].get<double>(), Scalar(cost["currency"]));
    if (cost.contains("budget"))
      os << absl::StrFormat(" of budget %.2f", cost["budget"].get<double>());
    if (cost.value("transfer", 0.0) > 0) {
      os << absl::StrFormat(" (compute %.4f, transfer %.6f)", cost["compute"].get<double>(),
                            cost["transfer"].get<double>());
    }
    std::vector<std::string> pools;
    for (auto& [pool, v] : cost["by_pool"].items())
      pools.push_back(absl::StrFormat("%s %.2f", pool, v.get<double>()));
    if (!pools.empty()) os << " (by pool: " << absl::StrJoin(pools, ", ") << ")";
    os << "\n";
  }
  if (results.contains("preemptions") && results["preemptions"].is_object()) {
    const nlohmann::json& pre = results["preemptions"];
    std::vector<std::string> pools;
    int by_pool = 0;
    for (auto& [pool, n] : pre["by_pool"].items()) {
      pools.push_back(absl::StrCat(pool, " ", n.get<int>()));
      by_pool += n.get<int>();
    }
    if (pre["total"].get<int>() > 0 || by_pool > 0) {
      // A federated run's preemptions are of its participants (results["rounds"]).
      os << "preemptions: " << pre["total"].get<int>()
         << (results.contains("rounds") ? " of participants" : " of trials");
      if (!pools.empty()) os << " (by pool: " << absl::StrJoin(pools, ", ") << ")";
      os << "\n";
    }
  }
  WritePrivacy(results, os);
}

// The trials, best first: the front (several objectives) or the best value, feasible before
// infeasible, completed before the rest; equals keep their order.
std::vector<const nlohmann::json*> RankedTrials(const nlohmann::json& results,
                                                const std::set<int64_t>& front) {
  const bool multi = results.contains("objectives");
  const bool maximize = !multi && results["objective"]["goal"] == "maximize";
  auto rank = [&](const nlohmann::json& t) {
    if (t["state"] != TrialStateName(v1::COMPLETED)) return 3;
    if (!t.value("feasible", true)) return 2;
    return multi ? (front.count(t["id"].get<int64_t>()) ? 0 : 1) : 0;
  };
  std::vector<const nlohmann::json*> rows;
  for (const auto& t : results["trials"]) rows.push_back(&t);
  std::stable_sort(rows.begin(), rows.end(), [&](const nlohmann::json* a, const nlohmann::json* b) {
    const int ra = rank(*a), rb = rank(*b);
    if (ra != rb) return ra < rb;
    if (multi || ra != 0 || !(*a)["value"].is_number() || !(*b)["value"].is_number()) return false;
    double x = (*a)["value"].get<double>(), y = (*b)["value"].get<double>();
    return maximize ? x > y : x < y;
  });
  return rows;
}

// One trial's line of the table (see ResultsToTable's header line).
std::string TrialLine(const nlohmann::json& t, bool multi, const std::set<int64_t>& front) {
  std::string extra;
  if (!t["error"].is_null()) {
    std::string e = t["error"];
    if (e.size() > 80) e = e.substr(0, 77) + "...";
    extra = "  error: " + e;
  }
  if (!t.value("feasible", true)) extra += "  infeasible";
  std::string value = Scalar(t["value"]);
  if (multi) {
    std::vector<std::string> vs;
    if (t.contains("values")) {
      for (const auto& v : t["values"])
        vs.push_back(v.is_number() ? absl::StrFormat("%.6g", v.get<double>()) : "-");
    }
    value = absl::StrJoin(vs, ",");
    if (front.count(t["id"].get<int64_t>())) extra += "  pareto";
  }
  return absl::StrFormat("%6s  %-10s  %14s  %8s  %s%s\n", Scalar(t["id"]), Scalar(t["state"]),
                         value, Scalar(t["attempts"]), t["params"].dump(), extra);
}

}  // namespace

std::string ResultsToTable(const nlohmann::json& results, int max_rows,
                           const std::string& run_dir) {
  std::ostringstream os;
  const bool multi = results.contains("objectives");
  const std::string metric = MetricLabel(results);
  WriteRunLine(results, os);
  WriteBest(results, metric, os);
  WriteCostAndPreemptions(results, os);
  // A federated run's one trial is the run itself; its rounds are what there is to list.
  if (results.contains("rounds")) return os.str() + FederatedRoundsToTable(results, max_rows);
  std::set<int64_t> front;
  if (multi && results.contains("pareto")) {
    for (const auto& p : results["pareto"]) front.insert(p["trial"].get<int64_t>());
  }
  std::vector<const nlohmann::json*> rows = RankedTrials(results, front);
  if (max_rows > 0 && static_cast<int>(rows.size()) > max_rows) rows.resize(max_rows);
  os << absl::StrFormat("%6s  %-10s  %14s  %8s  %s\n", "trial", "state", metric.substr(0, 14),
                        "attempts", "params");
  for (const nlohmann::json* t : rows) os << TrialLine(*t, multi, front);
  if (max_rows > 0 && static_cast<int>(results["trials"].size()) > max_rows) {
    os << "... " << results["trials"].size() - max_rows << " more (sextant results "
       << (run_dir.empty() ? "DIR" : run_dir) << " shows them all)\n";
  }
  return os.str();
}

std::string TelemetryTable(const std::vector<TelemetryRow>& latest, double now,
                           const std::string& ended) {
  if (latest.empty()) return "";
  std::ostringstream os;
  os << (ended.empty()
             ? "workers:\n"
             : absl::StrCat("workers: none running (", ended, "); their last heartbeats:\n"));
  for (const TelemetryRow& t : latest) {
    std::string gpu = t.gpu_count == 0
                          ? "no GPU"
                          : absl::StrFormat("%d GPU %3.0f%% %.1f/%.1f GiB", t.gpu_count,
                                            t.gpu_utilization, t.gpu_memory_bytes / 1073741824.0,
                                            t.gpu_memory_total_bytes / 1073741824.0);
    os << absl::StrFormat("  worker %-4d %-10s cpu %4.0f%%  rss %7.1f MiB  %s  (%.0fs ago)\n",
                          t.worker_id,
                          !ended.empty() ? std::string("-")
                          : t.trial_id   ? absl::StrCat("trial ", t.trial_id)
                                         : std::string("idle"),
                          t.cpu_percent, t.rss_bytes / 1048576.0, gpu, std::max(0.0, now - t.time));
  }
  return os.str();
}

}  // namespace sextant
