// Runs examples/cost-accuracy: the live search on a local spot pool (the built-in trainer on
// Fashion-MNIST, real processes and a real ledger) and its simulated twin.
#include <filesystem>
#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/orchestrator/test_util.h"

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
  WriteFile(dir + "/od.yaml", absl::StrReplaceAll(yaml, {{"policy: spot_first", "policy: on_demand"}}));
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

}  // namespace
}  // namespace sextant
