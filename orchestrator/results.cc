#include "orchestrator/results.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "orchestrator/run_dir.h"
#include "orchestrator/store.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {
namespace {

// {"total": n, "by_trial": {id: n}, "by_pool": {pool: n}}: trials count the attempts that a
// preemption notice ended; pools count the trials running on their instances when the market
// took them back (meta "fleet", written by the live fleet and by `sextant simulate`).
nlohmann::json PreemptionCounts(const std::vector<TrialRow>& trials,
                                const std::optional<std::string>& fleet) {
  nlohmann::json out = {{"total", 0}, {"by_trial", nlohmann::json::object()},
                        {"by_pool", nlohmann::json::object()}};
  int total = 0;
  for (const TrialRow& t : trials) {
    total += t.preemptions;
    if (t.preemptions > 0) out["by_trial"][absl::StrCat(t.id)] = t.preemptions;
  }
  out["total"] = total;
  if (!fleet) return out;
  nlohmann::json doc = nlohmann::json::parse(*fleet, nullptr, false);
  if (!doc.is_object() || !doc.contains("pools") || !doc["pools"].is_object()) return out;
  for (const auto& [name, p] : doc["pools"].items()) {
    if (p.is_object()) out["by_pool"][name] = p.value("preemptions", 0);
  }
  return out;
}


std::string Scalar(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return absl::StrCat(v.get<double>());
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

}  // namespace

absl::StatusOr<nlohmann::json> LoadResults(const std::string& run_dir) {
  SEXTANT_ASSIGN_OR_RETURN(auto store, Store::Open(RunDir::DbPath(run_dir), /*create=*/false,
                                                   /*read_only=*/true));
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> spec_bytes, store->GetMeta("spec"));
  v1::ExperimentSpec spec;
  if (!spec_bytes || !spec.ParseFromString(*spec_bytes)) {
    return absl::NotFoundError(absl::StrCat(run_dir, ": not a Sextant run directory (no spec)"));
  }
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> state, store->GetMeta("state"));
  SEXTANT_ASSIGN_OR_RETURN(std::vector<TrialRow> trials, store->LoadTrials());
  SEXTANT_ASSIGN_OR_RETURN(std::vector<MeasurementRow> ms, store->LoadMeasurements());
  SEXTANT_ASSIGN_OR_RETURN(std::vector<EventRow> events, store->LoadEvents());
  // Run directories from before the costs table have no cost rows: all costs read as 0.
  std::vector<CostRow> costs = store->LoadCosts().value_or(std::vector<CostRow>());
  std::map<int64_t, double> trial_cost;
  for (const CostRow& c : costs) {
    if (c.kind == "trial") trial_cost[c.ref] += c.cost;
  }
  std::map<int64_t, nlohmann::json> trial_events;
  for (const EventRow& e : events) {
    if (e.trial_id == 0) continue;
    trial_events[e.trial_id].push_back({{"time", e.time}, {"kind", e.kind}, {"message", e.message}});
  }

  const std::string& fidelity_key = spec.search().fidelity().name();
  std::map<int64_t, nlohmann::json> metrics;
  FidelityCount consumed;
  for (const MeasurementRow& m : ms) {
    nlohmann::json j = nlohmann::json::parse(m.metrics_json, nullptr, false);
    if (!j.is_object()) continue;
    nlohmann::json& into = metrics[m.trial_id];
    if (!into.is_object()) into = nlohmann::json::object();
    for (auto& [k, v] : j.items()) into[k] = v;
    if (!fidelity_key.empty() && j.contains(fidelity_key) && j[fidelity_key].is_number()) {
      consumed.Add(m.trial_id, m.attempt, j[fidelity_key].get<double>());
    }
  }
  const bool maximize = spec.objective().goal() == v1::Objective::MAXIMIZE;
  nlohmann::json doc;
  doc["experiment"] = spec.name();
  doc["state"] = state.value_or("UNKNOWN");
  // A federated run with differential privacy: the cumulative (epsilon, delta) so far.
  if (absl::StatusOr<std::optional<std::string>> privacy = store->GetMeta("privacy");
      privacy.ok() && *privacy) {
    nlohmann::json p = nlohmann::json::parse(**privacy, nullptr, false);
    if (p.is_object()) doc["privacy"] = p;
  }
  doc["objective"] = {{"metric", spec.objective().metric()},
                      {"goal", maximize ? "maximize" : "minimize"}};
  doc["best"] = nullptr;
  doc["trials"] = nlohmann::json::array();
  const TrialRow* best = nullptr;
  for (const TrialRow& t : trials) {
    nlohmann::json row;
    row["id"] = t.id;
    row["state"] = t.state;
    row["params"] = nlohmann::json::parse(t.params_json, nullptr, false);
    row["value"] = t.value ? nlohmann::json(*t.value) : nlohmann::json(nullptr);
    nlohmann::json m = metrics.count(t.id) ? metrics[t.id] : nlohmann::json::object();
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
    row["events"] = trial_events.count(t.id) ? trial_events[t.id] : nlohmann::json::array();
    row["cost"] = trial_cost.count(t.id) ? trial_cost[t.id] : 0.0;
    row["error"] = t.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.error);
    doc["trials"].push_back(std::move(row));
    if (t.state == "COMPLETED" && t.value &&
        (!best || (maximize ? *t.value > *best->value : *t.value < *best->value))) {
      best = &t;
    }
  }
  if (best) {
    doc["best"] = {{"trial", best->id},
                   {"value", *best->value},
                   {"params", nlohmann::json::parse(best->params_json, nullptr, false)}};
  }
  if (!fidelity_key.empty()) doc["fidelity_consumed"] = consumed.total();
  std::string currency = spec.budget().currency().empty() ? "USD" : spec.budget().currency();
  doc["cost"] = {{"total", 0.0}, {"currency", currency}, {"by_pool", nlohmann::json::object()}};
  double total = 0;
  for (const CostRow& c : costs) {
    if (c.kind == "trial") continue;
    total += c.cost;
    nlohmann::json& pool = doc["cost"]["by_pool"][c.pool];
    pool = (pool.is_number() ? pool.get<double>() : 0.0) + c.cost;
    if (!doc["cost"].contains("by_region")) doc["cost"]["by_region"] = nlohmann::json::object();
    nlohmann::json& region = doc["cost"]["by_region"][c.region];
    region = (region.is_number() ? region.get<double>() : 0.0) + c.cost;
  }
  doc["cost"]["total"] = total;
  if (spec.budget().has_max_cost()) doc["cost"]["budget"] = spec.budget().max_cost();
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> fleet, store->GetMeta("fleet"));
  doc["preemptions"] = PreemptionCounts(trials, fleet);
  return doc;
}

std::string ResultsToCsv(const nlohmann::json& results) {
  std::set<std::string> param_names, metric_names;
  for (const auto& t : results["trials"]) {
    for (auto& [k, v] : t["params"].items()) param_names.insert(k);
    for (auto& [k, v] : t["metrics"].items()) metric_names.insert(k);
  }
  std::vector<std::string> header = {"id", "state", "value", "attempts", "fidelity", "cost"};
  for (const auto& p : param_names) header.push_back("param." + p);
  for (const auto& m : metric_names) header.push_back("metric." + m);
  header.push_back("error");
  std::string out = absl::StrJoin(header, ",") + "\n";
  for (const auto& t : results["trials"]) {
    std::vector<std::string> row = {Scalar(t["id"]), Scalar(t["state"]), Scalar(t["value"]),
                                    Scalar(t["attempts"]), Scalar(t["fidelity"]),
                                    Scalar(t["cost"])};
    for (const auto& p : param_names) row.push_back(t["params"].contains(p) ? Scalar(t["params"][p]) : "");
    for (const auto& m : metric_names) row.push_back(t["metrics"].contains(m) ? Scalar(t["metrics"][m]) : "");
    row.push_back(Scalar(t["error"]));
    for (auto& f : row) f = CsvField(f);
    out += absl::StrJoin(row, ",") + "\n";
  }
  return out;
}

std::string ResultsToTable(const nlohmann::json& results, int max_rows) {
  std::map<std::string, int> counts;
  for (const auto& t : results["trials"]) ++counts[t["state"].get<std::string>()];
  std::vector<std::string> parts;
  for (const auto& [state, n] : counts) parts.push_back(absl::StrCat(n, " ", state));
  std::ostringstream os;
  const std::string metric = results["objective"]["metric"];
  os << "experiment " << Scalar(results["experiment"]) << " (" << Scalar(results["state"])
     << "): " << results["trials"].size() << " trials"
     << (parts.empty() ? "" : ", " + absl::StrJoin(parts, ", ")) << "\n";
  if (!results["best"].is_null()) {
    os << "best: trial " << Scalar(results["best"]["trial"]) << "  " << metric << "="
       << Scalar(results["best"]["value"]) << "  " << results["best"]["params"].dump() << "\n";
  }
  if (results.contains("cost") && results["cost"]["total"].is_number() &&
      results["cost"]["total"].get<double>() > 0) {
    const nlohmann::json& cost = results["cost"];
    os << absl::StrFormat("cost: %.2f %s", cost["total"].get<double>(), Scalar(cost["currency"]));
    if (cost.contains("budget")) os << absl::StrFormat(" of budget %.2f", cost["budget"].get<double>());
    std::vector<std::string> pools;
    for (auto& [pool, v] : cost["by_pool"].items()) pools.push_back(absl::StrFormat("%s %.2f", pool, v.get<double>()));
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
      os << "preemptions: " << pre["total"].get<int>() << " of trials";
      if (!pools.empty()) os << " (by pool: " << absl::StrJoin(pools, ", ") << ")";
      os << "\n";
    }
  }
  std::vector<const nlohmann::json*> rows;
  for (const auto& t : results["trials"]) rows.push_back(&t);
  const bool maximize = results["objective"]["goal"] == "maximize";
  std::stable_sort(rows.begin(), rows.end(), [&](const nlohmann::json* a, const nlohmann::json* b) {
    bool av = (*a)["state"] == "COMPLETED", bv = (*b)["state"] == "COMPLETED";
    if (av != bv) return av;
    if (!av) return false;
    double x = (*a)["value"].get<double>(), y = (*b)["value"].get<double>();
    return maximize ? x > y : x < y;
  });
  if (max_rows > 0 && static_cast<int>(rows.size()) > max_rows) rows.resize(max_rows);
  os << absl::StrFormat("%6s  %-10s  %14s  %8s  %s\n", "trial", "state", metric.substr(0, 14),
                        "attempts", "params");
  for (const nlohmann::json* t : rows) {
    std::string extra;
    if (!(*t)["error"].is_null()) {
      std::string e = (*t)["error"];
      if (e.size() > 80) e = e.substr(0, 77) + "...";
      extra = "  error: " + e;
    }
    os << absl::StrFormat("%6s  %-10s  %14s  %8s  %s%s\n", Scalar((*t)["id"]),
                          Scalar((*t)["state"]), Scalar((*t)["value"]), Scalar((*t)["attempts"]),
                          (*t)["params"].dump(), extra);
  }
  if (max_rows > 0 && static_cast<int>(results["trials"].size()) > max_rows) {
    os << "... " << results["trials"].size() - max_rows
       << " more (sextant results DIR shows them all)\n";
  }
  return os.str();
}

std::string TelemetryTable(const std::vector<TelemetryRow>& latest, double now) {
  if (latest.empty()) return "";
  std::ostringstream os;
  os << "workers:\n";
  for (const TelemetryRow& t : latest) {
    std::string gpu = t.gpu_count == 0
                          ? "no GPU"
                          : absl::StrFormat("%d GPU %3.0f%% %.1f/%.1f GiB", t.gpu_count,
                                            t.gpu_utilization, t.gpu_memory_bytes / 1073741824.0,
                                            t.gpu_memory_total_bytes / 1073741824.0);
    os << absl::StrFormat("  worker %-4d %-10s cpu %4.0f%%  rss %7.1f MiB  %s  (%.0fs ago)\n",
                          t.worker_id,
                          t.trial_id ? absl::StrCat("trial ", t.trial_id) : std::string("idle"),
                          t.cpu_percent, t.rss_bytes / 1048576.0, gpu, std::max(0.0, now - t.time));
  }
  return os.str();
}

}  // namespace sextant
