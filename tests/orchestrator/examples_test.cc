// Runs the examples that show the cost features: examples/cost-accuracy (the live search on a
// local spot pool, the built-in trainer on Fashion-MNIST, real processes and a real ledger, and
// its simulated twin), examples/spot-budget (spot interruptions, an on-demand fallback and a cap
// that runs out, live) and examples/simulate (a 32-GPU what-if on virtual time).
#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/test_util.h"
#include "tests/support/component.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::RunProcess;
using testing::WriteFile;

const std::string kSextant = std::string(SEXTANT_BIN_DIR) + "/sextant";
const std::string kExample = std::string(SEXTANT_SOURCE_DIR) + "/examples/cost-accuracy";

nlohmann::json Results(const std::string& run_dir) {
  auto r = RunProcess({kSextant, "results", run_dir, "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
}

TEST(CostAccuracyExampleTest, LiveSearchPutsLedgerDollarsOnAnAxis) {
  const std::string dir = MakeTempDir("cost-accuracy");
  std::string yaml = ReadFile(kExample + "/experiment.yaml");
  yaml = absl::StrReplaceAll(yaml, {{"max_trials: 24", "max_trials: 6"},
                                    {"train_subset: \"12000\"", "train_subset: \"3000\""},
                                    {"epochs: 2", "epochs: 1"}});
  WriteFile(dir + "/exp.yaml", yaml);
  auto r = RunProcess({kSextant, "run", dir + "/exp.yaml", "--run-dir", dir + "/run"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = Results(dir + "/run");
  ASSERT_EQ(j["objectives"].size(), 2u);
  EXPECT_EQ(j["objectives"][1]["metric"], "cost");
  int completed = 0;
  for (const auto& t : j["trials"]) {
    if (t["state"] != "COMPLETED") continue;
    ++completed;
    ASSERT_EQ(t["values"].size(), 2u) << t.dump();
    EXPECT_GT(t["values"][0].get<double>(), 0.15) << "better than chance (0.1) after one epoch";
    EXPECT_GT(t["values"][1].get<double>(), 0) << "every trial ran on a billed spot instance";
  }
  EXPECT_GE(completed, 4);
  EXPECT_GE(j["pareto"].size(), 1u);
  EXPECT_GT(j["cost"]["total"].get<double>(), 0);
  EXPECT_EQ(j["reference_point"][0], 0.7);
}

TEST(CostAccuracyExampleTest, SimulatedTwinShowsSpotFirstCheaperThanOnDemand) {
  const std::string dir = MakeTempDir("cost-accuracy-sim");
  std::string yaml = ReadFile(kExample + "/simulate.yaml");
  yaml = absl::StrReplaceAll(yaml, {{"max_trials: 200", "max_trials: 60"}});
  WriteFile(dir + "/spot.yaml", yaml);
  WriteFile(dir + "/od.yaml",
            absl::StrReplaceAll(yaml, {{"policy: spot_first", "policy: on_demand"}}));
  auto spot = RunProcess({kSextant, "simulate", dir + "/spot.yaml", "--run-dir", dir + "/spot"});
  ASSERT_EQ(spot.exit_code, 0) << spot.out << spot.err;
  auto od = RunProcess({kSextant, "simulate", dir + "/od.yaml", "--run-dir", dir + "/od"});
  ASSERT_EQ(od.exit_code, 0) << od.out << od.err;
  nlohmann::json a = Results(dir + "/spot"), b = Results(dir + "/od");
  EXPECT_GE(a["pareto"].size(), 2u);
  EXPECT_GT(a["hypervolume"].get<double>(), 0);
  EXPECT_LT(a["cost"]["total"].get<double>(), 0.6 * b["cost"]["total"].get<double>());
  // The time per epoch grows with width * depth (28 s to 788 s), so the dollars per epoch
  // trained spread across the space.
  double lo = 1e300, hi = 0;
  for (const auto& t : a["trials"]) {
    if (t["state"] != "COMPLETED" && t["state"] != "PRUNED") continue;
    const double per_epoch = t["cost"].get<double>() / t["fidelity"].get<double>();
    lo = std::min(lo, per_epoch);
    hi = std::max(hi, per_epoch);
  }
  EXPECT_GT(hi / lo, 5);
}

TEST(SpotBudgetExampleTest, LiveSpotSearchIsPreemptedFallsBackToOnDemandAndStopsAtTheCap) {
  const std::string example = std::string(SEXTANT_SOURCE_DIR) + "/examples/spot-budget";
  const std::string dir = MakeTempDir("spot-budget");
  // As a user runs it: from the example's folder, with its own catalog and script.
  auto r = RunProcess(
      {"sh", "-c",
       "cd " + example + " && " + kSextant + " run experiment.yaml --run-dir " + dir + "/run"},
      300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json j = Results(dir + "/run");
  EXPECT_EQ(j["state"], "BUDGET_EXHAUSTED");
  const double total = j["cost"]["total"].get<double>();
  EXPECT_LE(total, 1.5) << "the cap holds";
  EXPECT_GT(total, 1.0) << "most of the cap was used before it ran out";
  EXPECT_GT(j["cost"]["by_pool"]["spot"].get<double>(), 0);
  EXPECT_GT(j["cost"]["by_pool"]["on-demand"].get<double>(), 0) << "the top rung ran on demand";
  EXPECT_GE(j["preemptions"]["by_pool"]["spot"].get<int>(), 1) << j["preemptions"].dump();
  int completed = 0;
  for (const auto& t : j["trials"]) {
    if (t["state"] == "COMPLETED") {
      ++completed;
      EXPECT_EQ(t["fidelity"], 27.0) << t.dump();  // resumed to the exact target after reclaims
    }
  }
  EXPECT_GE(completed, 1);
  EXPECT_THAT(r.out, HasSubstr("preemptions:"));
}

TEST(SimulateExampleTest, WhatIfOn32GpusForecastsTheCapAndMixedPaysForOnDemand) {
  const std::string example = std::string(SEXTANT_SOURCE_DIR) + "/examples/simulate";
  const std::string dir = MakeTempDir("simulate-example");
  auto mixed =
      RunProcess({kSextant, "simulate", example + "/experiment.yaml", "--run-dir", dir + "/mixed"});
  ASSERT_EQ(mixed.exit_code, 0) << mixed.out << mixed.err;
  EXPECT_THAT(mixed.out, HasSubstr("at most 32 instances"));
  EXPECT_THAT(mixed.out, HasSubstr("(virtual)"));
  nlohmann::json a = Results(dir + "/mixed");
  EXPECT_EQ(a["state"], "BUDGET_EXHAUSTED") << "300 trials do not fit in $150";
  EXPECT_LE(a["cost"]["total"].get<double>(), 150.0);
  // The what-if the comment suggests: spot first, for the same cap.
  WriteFile(dir + "/spot.yaml", absl::StrReplaceAll(ReadFile(example + "/experiment.yaml"),
                                                    {{"policy: mixed", "policy: spot_first"}}));
  auto spot = RunProcess({kSextant, "simulate", dir + "/spot.yaml", "--run-dir", dir + "/spot"});
  ASSERT_EQ(spot.exit_code, 0) << spot.out << spot.err;
  nlohmann::json b = Results(dir + "/spot");
  EXPECT_EQ(b["state"], "BUDGET_EXHAUSTED");
  // Mixed placement runs the top rung on demand, at 3.3 times the spot price: it spends more
  // there than spot-first, which uses the on-demand pool only when the spot pools are full.
  EXPECT_GT(a["cost"]["by_pool"]["us-on-demand"].get<double>(),
            b["cost"]["by_pool"]["us-on-demand"].get<double>());
  // So spot-first trains more of the search (epochs over all trials) for the same dollars.
  auto epochs = [](const nlohmann::json& results) {
    double sum = 0;
    for (const auto& t : results["trials"])
      sum += t["fidelity"].is_number() ? t["fidelity"].get<double>() : 0;
    return sum;
  };
  EXPECT_GT(epochs(b), epochs(a));
}

}  // namespace
}  // namespace sextant

namespace sextant {
namespace {

// A copy of examples/FOLDER in a fresh temporary folder, as a user would take it out of the
// checkout; returns the copy's path.
std::string CopyExample(const std::string& folder) {
  const std::string dir = testing::MakeTempDir("example");
  std::filesystem::copy(
      std::string(SEXTANT_SOURCE_DIR) + "/examples/" + folder, dir,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  return dir;
}

// `sextant ARGS` run from `dir`, as a user in that folder would.
testing::CommandOutput InFolder(const std::string& dir, const std::string& args) {
  return testing::RunProcess(
      {"/bin/sh", "-c", "cd '" + dir + "' && exec '" + kSextant + "' " + args}, 600);
}

// examples/federated/tuning, copied out of the checkout and run from its folder as its README
// says: ASHA over rounds pauses and promotes federated trials under the study's privacy budget,
// and the random-stopping twin keeps only the best trial's model.
TEST(FederatedTuningExampleTest, BothStudiesRunFromACopyOfTheFolderAsItsReadmeSays) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = CopyExample("federated/tuning");
  auto in_folder = [&](const std::string& file) { return InFolder(dir, "run " + file); };
  auto run = in_folder("experiment.yaml");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  nlohmann::json doc = Results(dir + "/runs/fl-tuning");
  EXPECT_EQ(doc["state"], "COMPLETED");
  int paused_then_promoted = 0;
  for (const nlohmann::json& t : doc["trials"]) {
    paused_then_promoted += t["attempts"].get<int>() > 1;
  }
  EXPECT_GE(paused_then_promoted, 1) << doc["trials"].dump(1);
  EXPECT_EQ(doc["privacy"]["method"], "rdp_composition");
  EXPECT_LE(doc["privacy"]["study_epsilon"].get<double>(), 60);
  EXPECT_THAT(run.out, HasSubstr("privacy: the study spent epsilon"));
  // Every trial's participants billed on the pools, under the study's dollar cap.
  EXPECT_GT(doc["cost"]["total"].get<double>(), 0) << doc["cost"];
  EXPECT_LE(doc["cost"]["total"].get<double>(), 20) << doc["cost"];
  for (const nlohmann::json& t : doc["trials"]) EXPECT_GT(t.value("cost", 0.0), 0) << t;

  auto stopping = in_folder("random-stopping.yaml");
  ASSERT_EQ(stopping.exit_code, 0) << stopping.out << stopping.err;
  doc = Results(dir + "/runs/fl-tuning-random-stopping");
  EXPECT_EQ(doc["privacy"]["method"], "random_stopping");
  EXPECT_EQ(doc["trials"].size(), doc["privacy"]["trials_drawn"].get<size_t>());
  if (doc["trials"].size() >= 3) {  // past a few trials, the selection spends less than composition
    EXPECT_LT(doc["privacy"]["study_epsilon"].get<double>(),
              doc["privacy"]["composition_epsilon"].get<double>());
  }
  EXPECT_THAT(stopping.out, HasSubstr("random stopping released trial"));
}

// examples/federated/spot-regions, from a copy of the folder as its README says: the forecast,
// the live run on spot with interruptions compressed into seconds, and the forecast timed by
// that run, whose dollars are those of the run's own instances.
TEST(SpotRegionsExampleTest, ForecastRunAndCalibratedForecastFromACopyOfTheFolder) {
  SEXTANT_REQUIRE_COMPONENT(std::filesystem::exists("/usr/share/datasets/fashion-mnist"),
                            "no dataset");
  const std::string dir = CopyExample("federated/spot-regions");
  auto in_folder = [&](const std::string& args) { return InFolder(dir, args); };
  auto cost = [](const std::string& out) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(out, m, std::regex(R"(cost: +([0-9.]+) USD)"))) << out;
    return m.empty() ? -1.0 : std::stod(m[1]);
  };
  auto guess = in_folder("simulate experiment.yaml");
  ASSERT_EQ(guess.exit_code, 0) << guess.out << guess.err;
  auto on_demand = in_folder(
      "simulate experiment.yaml --market us-east-1=on_demand --market eu-west-1=on_demand");
  ASSERT_EQ(on_demand.exit_code, 0) << on_demand.err;
  EXPECT_LT(cost(guess.out), 0.5 * cost(on_demand.out)) << "spot clients cost under half";

  auto run = in_folder("run experiment.yaml --time-scale 2e-5");
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  nlohmann::json doc = Results(dir + "/runs/fl-spot-regions");
  EXPECT_EQ(doc["state"], "COMPLETED");
  EXPECT_GE(doc["rounds"].size(), 9u) << "a round may fail where the market took two clients";
  for (const char* pool : {"us-clients", "us-agg", "eu-clients", "eu-agg"}) {
    EXPECT_GT(doc["cost"]["by_pool"].value(pool, 0.0), 0) << pool << " " << doc["cost"];
  }
  EXPECT_GT(doc["cost"]["transfer"].get<double>(), 0) << doc["cost"];
  const double live = doc["cost"]["total"].get<double>();
  EXPECT_LE(live, 1.00);

  auto timed =
      in_folder("simulate experiment.yaml --time-scale 2e-5 --calibrate runs/fl-spot-regions");
  ASSERT_EQ(timed.exit_code, 0) << timed.out << timed.err;
  EXPECT_THAT(timed.out, HasSubstr("as runs/fl-spot-regions measured them"));
  // Timed by the run: its rounds are the median gap between the closes of its consecutive
  // rounds (a failed round, missing from the table, breaks the sequence).
  std::vector<double> gaps;
  for (size_t k = 1; k < doc["rounds"].size(); ++k) {
    const nlohmann::json& a = doc["rounds"][k - 1];
    const nlohmann::json& b = doc["rounds"][k];
    if (b["round"].get<int>() != a["round"].get<int>() + 1) continue;
    gaps.push_back(b["time"].get<double>() - a["time"].get<double>());
  }
  ASSERT_GE(gaps.size(), 2u);
  std::sort(gaps.begin(), gaps.end());
  const size_t n = gaps.size();
  const double median = n % 2 ? gaps[n / 2] : (gaps[n / 2 - 1] + gaps[n / 2]) / 2;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(timed.out, m, std::regex(R"(10 rounds of ([0-9.e-]+)s after)")))
      << timed.out;
  EXPECT_NEAR(std::stod(m[1]), median, 1e-3) << timed.out;
  // The same seed's market over the run's timing: the same instances, up to the replacements
  // drawn where the two timelines part (each about a tenth of the bill).
  EXPECT_GT(cost(timed.out), 0.5 * live) << timed.out << doc["cost"];
  EXPECT_LT(cost(timed.out), 2 * live) << timed.out << doc["cost"];
}

}  // namespace
}  // namespace sextant
