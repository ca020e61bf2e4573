#include "orchestrator/store.h"

#include "gtest/gtest.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

TEST(StoreTest, OpensInWalModeAndKeepsCommittedRowsAcrossReopen) {
  std::string dir = testing::MakeTempDir("store");
  {
    auto store = *Store::Open(dir + "/state.db", true);
    ASSERT_TRUE(store->Begin().ok());
    TrialRow t;
    t.id = 1;
    t.state = "COMPLETED";
    t.params_json = R"({"x":1.5})";
    t.attempts = 1;
    t.value = 0.25;
    t.created_at = 10;
    t.finished_at = 11;
    t.fidelity = 9;
    t.rungs_json = R"([{"fidelity":9}])";
    ASSERT_TRUE(store->PutTrial(t).ok());
    ASSERT_TRUE(store->PutMeta("state", "RUNNING").ok());
    ASSERT_TRUE(store->Commit().ok());
  }
  EXPECT_EQ(testing::ReadFile(dir + "/state.db").substr(0, 15), "SQLite format 3");
  auto store = *Store::Open(dir + "/state.db", false, true);
  auto trials = *store->LoadTrials();
  ASSERT_EQ(trials.size(), 1u);
  EXPECT_EQ(trials[0].params_json, R"({"x":1.5})");
  EXPECT_EQ(*trials[0].value, 0.25);
  EXPECT_EQ(trials[0].fidelity, 9);
  EXPECT_EQ(trials[0].rungs_json, R"([{"fidelity":9}])");
  EXPECT_EQ(**store->GetMeta("state"), "RUNNING");
  EXPECT_FALSE(store->GetMeta("missing")->has_value());
}

TEST(StoreTest, RolledBackChangesAreNotKept) {
  std::string dir = testing::MakeTempDir("store");
  auto store = *Store::Open(dir + "/state.db", true);
  ASSERT_TRUE(store->Begin().ok());
  ASSERT_TRUE(store->PutMeta("k", "v").ok());
  store->Rollback();
  EXPECT_FALSE(store->GetMeta("k")->has_value());
}

TEST(StoreTest, DuplicateMeasurementIsIgnored) {
  std::string dir = testing::MakeTempDir("store");
  auto store = *Store::Open(dir + "/state.db", true);
  MeasurementRow m{1, 1, 1, 0.5, R"({"loss":1})"};
  EXPECT_TRUE(*store->AddMeasurement(m));
  EXPECT_FALSE(*store->AddMeasurement(m));
  m.attempt = 2;  // the same sequence number in a new attempt is a new measurement
  EXPECT_TRUE(*store->AddMeasurement(m));
  EXPECT_EQ(store->LoadMeasurements(1)->size(), 2u);
}

TEST(StoreTest, MissingStoreIsNotFound) {
  auto r = Store::Open("/nonexistent/state.db", false, true);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sextant
