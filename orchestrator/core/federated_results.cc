#include "orchestrator/core/federated_results.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "aggregator/federation_plan.h"
#include "federation/rdp_accountant.h"
#include "federation/study_privacy.h"
#include "orchestrator/core/study_privacy.h"
#include "common/exact_number.h"
#include "federation/rdp_accountant.h"

namespace sextant {
namespace {

std::string OptimizerName(const std::string& name) {
  static const std::map<std::string, std::string> kNames = {
      {"", "FedAvg"},         {"fedavg", "FedAvg"},   {"fedavgm", "FedAvgM"},
      {"fedadam", "FedAdam"}, {"fedyogi", "FedYogi"}, {"fedadagrad", "FedAdagrad"}};
  auto it = kNames.find(name);
  return it == kNames.end() ? name : it->second;
}

std::string Regions(const v1::Federation& f) {
  int total = 0;
  bool same = true;
  std::vector<std::string> each;
  for (const v1::FederatedRegion& r : f.regions()) {
    total += r.clients();
    same &= r.clients() == f.regions(0).clients();
    each.push_back(absl::StrCat(r.name(), " ", r.clients()));
  }
  const int n = f.regions_size();
  const std::string regions = absl::StrCat(n, n == 1 ? " region" : " regions");
  if (n == 0) return "no regions";
  if (same) {
    return absl::StrCat(regions, " x ", total / n, total / n == 1 ? " client" : " clients");
  }
  return absl::StrCat(regions, ", ", total, " clients (", absl::StrJoin(each, ", "), ")");
}

std::string Participation(const v1::Federation& f) {
  const double k = f.clients_per_round();
  if (k <= 0 || k == 1) return "";
  if (k < 1) return absl::StrFormat("%g%% of the clients a round", k * 100);
  return absl::StrFormat("%g clients a round", k);
}

std::string Rounds(const v1::Federation& f) {
  if (f.mode() == "buffered") {
    return absl::StrCat(f.rounds(), " buffered server steps of ", f.buffer_size(),
                        " client updates");
  }
  return absl::StrCat(f.rounds(), f.rounds() == 1 ? " round" : " rounds");
}

std::string Aggregation(const v1::Federation& f) {
  std::string out = f.secure_aggregation() ? "secure aggregation" : "plaintext aggregation";
  if (f.secure_aggregation() && f.hide_region_sums()) out += " (region sums hidden too)";
  if (!f.update_compression().empty() && f.update_compression() != "none") {
    absl::StrAppend(&out, ", ", f.update_compression(), " updates");
  }
  if (!f.aggregation().empty() && f.aggregation() != "fedavg") {
    absl::StrAppend(&out, ", ", f.aggregation(), " within each region");
  }
  return out;
}

std::string Model(const v1::ExperimentSpec& spec) {
  const v1::Federation& f = spec.federation();
  if (!f.model_file().empty()) {
    return absl::StrCat("model ", std::filesystem::path(f.model_file()).filename().string());
  }
  if (!spec.trial().builtin().model().empty()) {
    return absl::StrCat("built-in ", spec.trial().builtin().model());
  }
  return "";
}

std::string EvalEvery(const v1::Federation& f) {
  if (f.eval_every() <= 1) return "";
  return absl::StrCat(" (every ", f.eval_every(),
                      " rounds and after the last; the rounds between repeat the last score)");
}

// Dollars of the billed rows (not trial attributions) accrued in (from, to], of one region when
// region is set, of transfer rows only with transfer_only. An instance's bill accrues evenly
// over its [start, end]; a reservation or a transfer is paid at its start. nullopt when no row
// is billed (to that region).
std::optional<double> CostBetween(const std::vector<CostRow>& costs, double from, double to,
                                  const std::string* region, bool transfer_only = false) {
  std::optional<double> total;
  for (const CostRow& c : costs) {
    if (c.kind == "trial" || (region != nullptr && c.region != *region)) continue;
    if (transfer_only && c.kind != "transfer") continue;
    double share = 0;
    if (c.kind == "reservation" || c.end <= c.start) {
      share = c.start > from && c.start <= to ? c.cost : 0;
    } else {
      const double overlap = std::min(to, c.end) - std::max(from, c.start);
      share = overlap > 0 ? c.cost * overlap / (c.end - c.start) : 0;
    }
    total = total.value_or(0) + share;
  }
  return total;
}

nlohmann::json Figures(const RoundRow& r, const std::optional<double>& cost,
                       const std::optional<double>& transfer) {
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json out = {{"accuracy", number(r.accuracy)},
          {"loss", number(r.loss)},
          {"clients", r.clients},
          {"rejected", r.rejected},
          {"epsilon", r.epsilon ? number(*r.epsilon) : nlohmann::json()},
          {"cost", cost ? nlohmann::json(*cost) : nlohmann::json()},
          {"transfer", transfer ? nlohmann::json(*transfer) : nlohmann::json()}};
  // A region's row without clients or scores: it sat the round out (federated_run.cc).
  if (!r.region.empty() && r.clients == 0 && std::isnan(r.accuracy)) out["sat_out"] = true;
  return out;
}

std::string Exact(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_number_float()) return ExactNumber(v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string Fixed4(const nlohmann::json& v) {
  return v.is_number() ? absl::StrFormat("%.4f", v.get<double>()) : "-";
}

}  // namespace

bool IsFederatedRun(const v1::ExperimentSpec& spec) {
  return spec.has_federation() && spec.parameters_size() == 0;
}

std::string DescribeFederation(const v1::ExperimentSpec& spec) {
  const v1::Federation& f = spec.federation();
  std::vector<std::string> parts = {Regions(f)};
  if (std::string p = Participation(f); !p.empty()) parts.push_back(p);
  parts.push_back(Rounds(f));
  parts.push_back(Aggregation(f));
  std::string optimizer = OptimizerName(f.server_optimizer());
  if (f.proximal_mu() > 0)
    absl::StrAppendFormat(&optimizer, " with FedProx mu=%g", f.proximal_mu());
  parts.push_back(optimizer);
  if (f.has_dp()) {
    std::string dp = absl::StrFormat("differential privacy (noise %g, clip %g",
                                     f.dp().noise_multiplier(), f.dp().clip_norm());
    if (f.dp().target_epsilon() > 0)
      absl::StrAppendFormat(&dp, ", target epsilon %g", f.dp().target_epsilon());
    parts.push_back(dp + ")");
  }
  if (std::string m = Model(spec); !m.empty()) parts.push_back(m);
  if (f.data() == "own") parts.push_back("own data");
  return absl::StrCat("federated: ", absl::StrJoin(parts, ", "));
}

std::string DescribeExperiment(const v1::ExperimentSpec& spec) {
  const std::string search =
      absl::StrCat(spec.parameters_size(), " parameters, ", spec.search().max_trials(), " trials");
  if (!spec.has_federation()) return search;
  if (IsFederatedRun(spec)) return DescribeFederation(spec);
  return absl::StrCat("search over federated runs: ", search, "; each run ",
                      DescribeFederation(spec));
}

RoundMetricMeanings RoundMetricMeaning(const v1::ExperimentSpec& spec) {
  const v1::Federation& f = spec.federation();
  RoundMetricMeanings m;
  const bool scored_after_step = f.model_file().empty() || !f.evaluate_command().empty();
  if (f.model_file().empty()) {
    m.global = absl::StrCat(
        "the global model after the round's server step, scored by the orchestrator on ",
        f.validation_examples() > 0 ? f.validation_examples() : 10000,
        " held-out validation examples", EvalEvery(f));
  } else if (!f.evaluate_command().empty()) {
    m.global = absl::StrCat(
        "the global model after the round's server step, scored by "
        "evaluate_command (",
        absl::StrJoin(f.evaluate_command(), " "), ")", EvalEvery(f));
  } else {
    m.global =
        "the clients' own scores of the global model they received at the start of the round, "
        "before training, weighted by their eval_examples (round 1: the initial model; set "
        "federation.evaluate_command to score the model after each round)";
  }
  m.regions = absl::StrCat(
      "each region's clients scoring the global model they received at the start of the round "
      "on their own held-out data, before their local training, weighted by their examples: "
      "round 1 scores the initial, untrained model",
      scored_after_step ? ", and each round trails the global row, which is scored after the step"
                        : "");
  m.cost =
      "dollars billed between the previous round's close and this round's (round 1: since the "
      "run started); a region's: its own instances' share; empty while nothing is billed";
  m.epsilon = f.has_dp() ? "the run's cumulative privacy loss after the round (delta " +
                               absl::StrFormat("%g", f.dp().delta() > 0 ? f.dp().delta() : 1e-5) +
                               "), on the global row"
                         : "no differential privacy in this run";
  return m;
}

void AddFederatedRounds(const v1::ExperimentSpec& spec, const std::vector<RoundRow>& rows,
                        const std::vector<CostRow>& costs, nlohmann::json* results) {
  const v1::Federation& f = spec.federation();
  const RoundMetricMeanings meaning = RoundMetricMeaning(spec);
  nlohmann::json regions = nlohmann::json::array();
  for (const v1::FederatedRegion& r : f.regions())
    regions.push_back({{"name", r.name()}, {"clients", r.clients()}});
  // One entry per round; a round's global row and its regions' rows are adjacent (by round).
  std::map<int64_t, nlohmann::json> rounds;
  std::map<int64_t, double> closed;
  for (const RoundRow& r : rows) closed[r.round] = std::max(closed[r.round], r.time);
  double previous = -std::numeric_limits<double>::infinity();
  std::map<int64_t, double> opened;
  for (const auto& [round, time] : closed) {
    opened[round] = previous;
    previous = time;
  }
  for (const RoundRow& r : rows) {
    nlohmann::json& entry = rounds[r.round];
    if (entry.is_null()) {
      // Filled from the global row; a round without one (never written so) keeps nulls.
      entry = {{"round", r.round},    {"time", closed[r.round]},
               {"accuracy", nullptr}, {"loss", nullptr},
               {"clients", nullptr},  {"rejected", nullptr},
               {"epsilon", nullptr},  {"cost", nullptr},
               {"transfer", nullptr}, {"regions", nlohmann::json::object()}};
    }
    const std::string* region = r.region.empty() ? nullptr : &r.region;
    const std::optional<double> cost = CostBetween(costs, opened[r.round], closed[r.round], region);
    const std::optional<double> transfer =
        CostBetween(costs, opened[r.round], closed[r.round], region, /*transfer_only=*/true);
    if (r.region.empty()) {
      entry.update(Figures(r, cost, transfer));
    } else {
      entry["regions"][r.region] = Figures(r, cost, transfer);
    }
  }
  nlohmann::json list = nlohmann::json::array();
  for (auto& [round, entry] : rounds) list.push_back(std::move(entry));
  (*results)["federation"] = {{"description", DescribeFederation(spec)},
                              {"mode", f.mode().empty() ? "sync" : f.mode()},
                              {"regions", std::move(regions)},
                              {"rounds_planned", f.rounds()},
                              {"rounds_completed", rounds.empty() ? 0 : rounds.rbegin()->first},
                              {"metrics",
                               {{"global", meaning.global},
                                {"regions", meaning.regions},
                                {"cost", meaning.cost},
                                {"epsilon", meaning.epsilon}}}};
  (*results)["rounds"] = std::move(list);
}

nlohmann::json StudyPrivacy(const v1::ExperimentSpec& spec, const nlohmann::json& trials) {
  const double delta = DpAccountantOptions(spec.federation()).delta;
  struct Spent {
    int64_t trial;
    TrialPrivacy privacy;
    nlohmann::json epsilon;
  };
  std::vector<Spent> spent;
  bool sampled = PlannedTrialPrivacy(spec).sampling_rate < 1;
  for (const nlohmann::json& t : trials) {
    if (!t.contains("privacy") || !t["privacy"].is_object()) continue;
    const nlohmann::json& p = t["privacy"];
    spent.push_back({t.value("id", int64_t{0}),
                     {p.value("sampling_rate", 1.0), p.value("noise_multiplier", 0.0),
                      p.value("rounds", int64_t{0})},
                     p["epsilon"]});
    sampled = sampled || spent.back().privacy.sampling_rate < 1;
  }
  // Fractional orders only when no trial sampled its clients.
  StudyPrivacyAccount account(DefaultRdpOrders(sampled), delta);
  // Random stopping needs one RDP curve every trial keeps to: the largest at each order.
  std::vector<double> worst(account.orders().size(), 0.0);
  nlohmann::json per_trial = nlohmann::json::array();
  for (const Spent& s : spent) {
    account.Add(s.privacy);
    const std::vector<double> rdp = account.TrialRdp(s.privacy);
    for (size_t i = 0; i < worst.size(); ++i) worst[i] = std::max(worst[i], rdp[i]);
    per_trial.push_back({{"trial", s.trial},
                         {"epsilon", s.epsilon},
                         {"rounds", s.privacy.rounds},
                         {"study_epsilon", account.Epsilon()}});
  }
  nlohmann::json out = {{"study_epsilon", account.Epsilon()},
                        {"delta", delta},
                        {"method", "rdp_composition"},
                        {"rounds", account.rounds()},
                        {"per_trial", std::move(per_trial)}};
  if (std::optional<RandomStopping> r = RandomStoppingOf(spec)) {
    // What the selection releases is bounded whatever the number of trials drawn: it holds for
    // the planned trial too, so it is stated before any trial has run.
    const std::vector<double> planned = account.TrialRdp(PlannedTrialPrivacy(spec));
    for (size_t i = 0; i < worst.size(); ++i) worst[i] = std::max(worst[i], planned[i]);
    out["composition_epsilon"] = out["study_epsilon"];
    out["study_epsilon"] = RandomStoppingEpsilon(*r, account.orders(), worst, delta);
    out["method"] = "random_stopping";
    out["distribution"] = r->distribution == RandomStopping::Distribution::kPoisson
                              ? "poisson"
                              : "truncated_negative_binomial";
    out["mean_trials"] = ExpectedTrials(*r);
    if (r->distribution != RandomStopping::Distribution::kPoisson) {
      out["eta"] = r->eta;
      out["gamma"] = r->gamma;
    }
    out["trials_drawn"] = spec.search().max_trials();
    out["released"] = "the best trial's model only; every other trial's models are deleted";
  }
  return out;
}

std::string FederatedRoundsToCsv(const nlohmann::json& results) {
  std::string out = "round,scope,region,accuracy,loss,clients,rejected,epsilon,cost,time\n";
  auto line = [&](const nlohmann::json& round, const std::string& scope, const std::string& region,
                  const nlohmann::json& v) {
    std::vector<std::string> fields = {Exact(round["round"]),
                                       scope,
                                       region,
                                       Exact(v["accuracy"]),
                                       Exact(v["loss"]),
                                       Exact(v["clients"]),
                                       Exact(v["rejected"]),
                                       Exact(v["epsilon"]),
                                       Exact(v["cost"]),
                                       Exact(round["time"])};
    // Region names are [a-z0-9_-] (the loader's rule for names), so no field needs quoting.
    absl::StrAppend(&out, absl::StrJoin(fields, ","), "\n");
  };
  for (const nlohmann::json& r : results["rounds"]) {
    line(r, "global", "", r);
    for (const auto& [region, v] : r["regions"].items()) line(r, "region", region, v);
  }
  return out;
}

std::string FederatedRoundsToTable(const nlohmann::json& results, int max_rows) {
  const nlohmann::json& rounds = results["rounds"];
  const nlohmann::json& fed = results["federation"];
  std::ostringstream os;
  size_t from = 0;
  if (max_rows > 0 && rounds.size() > static_cast<size_t>(max_rows)) {
    from = rounds.size() - max_rows;
    os << "... " << from << " earlier rounds (sextant results shows them all)\n";
  }
  os << absl::StrFormat("%6s  %-12s  %9s  %9s  %7s  %8s  %9s  %9s\n", "round", "scope", "accuracy",
                        "loss", "clients", "rejected", "epsilon", "cost");
  auto line = [&](const std::string& round, const std::string& scope, const nlohmann::json& v) {
    os << absl::StrFormat("%6s  %-12s  %9s  %9s  %7s  %8s  %9s  %9s\n", round, scope,
                          Fixed4(v["accuracy"]), Fixed4(v["loss"]), Exact(v["clients"]),
                          Exact(v["rejected"]), Fixed4(v["epsilon"]), Fixed4(v["cost"]));
  };
  for (size_t i = from; i < rounds.size(); ++i) {
    const nlohmann::json& r = rounds[i];
    line(Exact(r["round"]), "global", r);
    for (const auto& [region, v] : r["regions"].items()) line("", region, v);
  }
  const nlohmann::json& m = fed["metrics"];
  os << "global: " << m["global"].get<std::string>() << ".\n";
  if (std::any_of(rounds.begin(), rounds.end(),
                  [](const nlohmann::json& r) { return !r["regions"].empty(); })) {
    os << "regions: " << m["regions"].get<std::string>() << ".\n";
  }
  return os.str();
}

}  // namespace sextant
