#include "orchestrator/core/study_cost.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "orchestrator/core/run_dir.h"

namespace sextant {
namespace {

// Writes `rows` as the bills of trial `id`'s own federated run under run_dir.
void Bill(const std::string& run_dir, int64_t id, const std::vector<CostRow>& rows) {
  const std::string dir = RunDir::FederatedTrialDir(run_dir, id);
  std::filesystem::create_directories(dir);
  auto store = *Store::Open(RunDir::DbPath(dir), true);
  ASSERT_TRUE(store->ReplaceCosts(rows).ok());
}

// The trials' own bills become the study's rows: shifted into the search's time, with one
// "trial" row each that adds them up, and a trial with no run yet has none.
TEST(StudyCostTest, EveryTrialsBillsAddUpShiftedIntoTheSearchsTime) {
  const std::string run_dir = ::testing::TempDir() + "/study-cost";
  std::filesystem::remove_all(run_dir);
  Bill(run_dir, 1,
       {{"instance", 1, "us-gpu", "us-east-1", "spot", 0, 60, 0.25},
        {"transfer", 4000, "transfer", "eu-west-1", "", 1, 2, 0.5},
        {"trial", 1, "", "", "", 0, 60, 0.75}});  // an attribution row of its own: not counted
  Bill(run_dir, 3, {{"instance", 2, "eu-agg", "eu-west-1", "on_demand", 5, 65, 1.0}});
  auto none = [](int64_t) { return false; };
  absl::StatusOr<std::vector<CostRow>> rows =
      FederatedTrialCosts(run_dir, 3, {{1, 10.0}, {3, 100.0}}, none);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 5u);
  EXPECT_DOUBLE_EQ((*rows)[0].start, 10);
  EXPECT_DOUBLE_EQ((*rows)[0].end, 70);
  EXPECT_EQ((*rows)[2].kind, "trial");
  EXPECT_EQ((*rows)[2].ref, 1);
  EXPECT_DOUBLE_EQ((*rows)[2].cost, 0.75);
  EXPECT_EQ((*rows)[4].ref, 3);
  EXPECT_DOUBLE_EQ((*rows)[4].start, 105);
  EXPECT_DOUBLE_EQ(BilledTotal(*rows), 1.75);
  // The dearest round: trial 1 ran 3 rounds for 0.75, trial 3 one round for 1.0.
  EXPECT_DOUBLE_EQ(CostPerRound(*rows, {{1, 3}, {3, 1}}), 1.0);
  EXPECT_DOUBLE_EQ(CostPerRound(*rows, {{1, 3}, {3, 0}}), 0.25);
  EXPECT_DOUBLE_EQ(CostPerRound(*rows, {}), 0);
}

// A running trial's run may still be creating its store: it counts as no bills yet. Any other
// trial's unreadable store is an error naming it.
TEST(StudyCostTest, AStoreBeingCreatedCountsAsNothingOnlyWhileItsTrialRuns) {
  const std::string run_dir = ::testing::TempDir() + "/study-cost-starting";
  std::filesystem::remove_all(run_dir);
  const std::string dir = RunDir::FederatedTrialDir(run_dir, 2);
  std::filesystem::create_directories(dir);
  std::ofstream(RunDir::DbPath(dir)) << "";  // created, no schema yet
  absl::StatusOr<std::vector<CostRow>> rows =
      FederatedTrialCosts(run_dir, 2, {}, [](int64_t id) { return id == 2; });
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_TRUE(rows->empty());
  rows = FederatedTrialCosts(run_dir, 2, {}, [](int64_t) { return false; });
  EXPECT_TRUE(absl::IsInternal(rows.status())) << rows.status();
  EXPECT_NE(rows.status().message().find("trial 2's bills"), std::string::npos);
}

}  // namespace
}  // namespace sextant
