#include "orchestrator/core/store.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
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
    t.state = v1::COMPLETED;
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

TEST(StoreTest, TimesReadBackExactToTheMicrosecond) {
  std::string dir = testing::MakeTempDir("store");
  const double t = 1796367326.654321;
  {
    auto store = *Store::Open(dir + "/state.db", true);
    ASSERT_TRUE(store->PutTimeMeta("finished_at", t).ok());
  }
  auto store = *Store::Open(dir + "/state.db", false, true);
  std::optional<double> back = *store->GetTimeMeta("finished_at");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(std::llround(*back * 1e6), std::llround(t * 1e6));
  EXPECT_EQ(**store->GetMeta("finished_at"), "1796367326.654321");
  EXPECT_FALSE(store->GetTimeMeta("started_at")->has_value());
}

TEST(StoreTest, ARoundedTimeIsReadAsTheRecordsTellIt) {
  std::string dir = testing::MakeTempDir("store");
  {
    auto store = *Store::Open(dir + "/state.db", true);
    ASSERT_TRUE(store->AddEvent(1796367326.25, "run_finished", 0, "COMPLETED").ok());
    ASSERT_TRUE(store->PutMeta("finished_at", "1.79637e+09").ok());
  }
  // Read-only: derived, the file untouched.
  {
    auto store = *Store::Open(dir + "/state.db", false, true);
    EXPECT_EQ(**store->GetTimeMeta("finished_at"), 1796367326.25);
    EXPECT_EQ(**store->GetMeta("finished_at"), "1.79637e+09");
  }
  // Read-write: repaired in place.
  auto store = *Store::Open(dir + "/state.db", false);
  EXPECT_EQ(**store->GetMeta("finished_at"), "1796367326.250000");
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

namespace sextant {
namespace {

TEST(StoreTest, ObjectiveValuesViolationsAndCostSurviveAReopen) {
  std::string dir = testing::MakeTempDir("store-outcome");
  {
    auto store = *Store::Open(dir + "/state.db", true);
    TrialRow t;
    t.id = 1;
    t.state = v1::COMPLETED;
    t.params_json = "{}";
    t.values = {0.91, 2.5};
    t.feasible = false;
    t.violations = {-1, std::numeric_limits<double>::infinity()};
    t.cost = 0.125;
    t.seconds = 42;
    ASSERT_TRUE(store->PutTrial(t).ok());
  }
  auto store = *Store::Open(dir + "/state.db", false, true);
  auto rows = *store->LoadTrials();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].values, (std::vector<double>{0.91, 2.5}));
  EXPECT_FALSE(rows[0].feasible);
  ASSERT_EQ(rows[0].violations.size(), 2u);
  EXPECT_EQ(rows[0].violations[0], -1);
  EXPECT_TRUE(std::isinf(rows[0].violations[1]));
  EXPECT_EQ(rows[0].cost, 0.125);
  EXPECT_EQ(rows[0].seconds, 42);
}

// JSON has no inf or NaN: an objective value that is one (an imported Optuna trial's, a
// diverged loss) reads back as itself, not as NaN.
TEST(StoreTest, NonFiniteObjectiveValuesReadBackExactly) {
  std::string dir = testing::MakeTempDir("store-nonfinite");
  const double inf = std::numeric_limits<double>::infinity();
  {
    auto store = *Store::Open(dir + "/state.db", true);
    TrialRow t;
    t.id = 1;
    t.state = v1::COMPLETED;
    t.params_json = "{}";
    t.values = {inf, -inf, std::numeric_limits<double>::quiet_NaN(), 1.5};
    t.violations = {-inf};
    ASSERT_TRUE(store->PutTrial(t).ok());
  }
  auto rows = *(*Store::Open(dir + "/state.db", false, true))->LoadTrials();
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].values.size(), 4u);
  EXPECT_EQ(rows[0].values[0], inf);
  EXPECT_EQ(rows[0].values[1], -inf);
  EXPECT_TRUE(std::isnan(rows[0].values[2]));
  EXPECT_EQ(rows[0].values[3], 1.5);
  EXPECT_EQ(rows[0].violations, (std::vector<double>{-inf}));
}

// A run directory written before trials had an `outcome` column: read-only opens read the
// defaults, and a read-write open (resume) adds the column and keeps every row.
TEST(StoreTest, StoreFromBeforeOutcomesIsReadAndUpgraded) {
  std::string dir = testing::MakeTempDir("store-old");
  const std::string db = dir + "/state.db";
  auto r =
      testing::RunProcess({"sqlite3", db,
                           "CREATE TABLE trials(id INTEGER PRIMARY KEY, state TEXT NOT NULL,"
                           " params TEXT NOT NULL, attempts INTEGER NOT NULL, failures INTEGER"
                           " NOT NULL, value REAL, error TEXT NOT NULL, created_at REAL NOT NULL,"
                           " finished_at REAL NOT NULL, fidelity REAL NOT NULL DEFAULT 0, target"
                           " REAL NOT NULL DEFAULT 0, rungs TEXT NOT NULL DEFAULT '[]',"
                           " scratch_restarts INTEGER NOT NULL DEFAULT 0, paused INTEGER NOT NULL"
                           " DEFAULT 0, preemptions INTEGER NOT NULL DEFAULT 0);"
                           " INSERT INTO trials VALUES(1, 'COMPLETED', '{}', 1, 0, 0.5, '', 1, 2,"
                           " 0, 0, '[]', 0, 0, 0);"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  {
    auto store = Store::Open(db, false, true);
    ASSERT_TRUE(store.ok()) << store.status();
    auto rows = (*store)->LoadTrials();
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), 1u);
    EXPECT_EQ((*rows)[0].value, 0.5);
    EXPECT_TRUE((*rows)[0].feasible);
  }
  auto store = Store::Open(db, false);
  ASSERT_TRUE(store.ok()) << store.status();
  TrialRow t = (*(*store)->LoadTrials())[0];
  t.values = {1, 2};
  ASSERT_TRUE((*store)->PutTrial(t).ok());
  EXPECT_EQ((*(*store)->LoadTrials())[0].values, (std::vector<double>{1, 2}));
}

// Attempt outcomes are stored as the text every version has written ("lost" in lower case, no
// text while the attempt runs), so old run directories read back the same outcomes.
TEST(StoreTest, AttemptOutcomesAreStoredAsTheTextEveryVersionWrote) {
  const std::map<v1::AttemptOutcome, std::string> names = {{v1::ATTEMPT_COMPLETED, "COMPLETED"},
                                                           {v1::ATTEMPT_PRUNED, "PRUNED"},
                                                           {v1::ATTEMPT_PAUSED, "PAUSED"},
                                                           {v1::ATTEMPT_FAILED, "FAILED"},
                                                           {v1::ATTEMPT_PREEMPTED, "PREEMPTED"},
                                                           {v1::ATTEMPT_CANCELLED, "CANCELLED"},
                                                           {v1::ATTEMPT_LOST, "lost"}};
  std::string dir = testing::MakeTempDir("store-attempts");
  const std::string db = dir + "/state.db";
  std::string expected;
  {
    auto store = *Store::Open(db, true);
    int attempt = 0;
    for (const auto& [outcome, name] : names) {
      ++attempt;
      ASSERT_TRUE(store->StartAttempt(1, attempt, 1, attempt).ok());
      ASSERT_TRUE(store->FinishAttempt(1, attempt, outcome, 0, "", attempt + 0.5).ok());
      absl::StrAppend(&expected, attempt, "|", name, "\n");
    }
    ASSERT_TRUE(store->StartAttempt(1, attempt + 1, 1, attempt + 1).ok());  // still running
    absl::StrAppend(&expected, attempt + 1, "|\n");
  }
  auto r = testing::RunProcess(
      {"sqlite3", db, "SELECT attempt, outcome FROM attempts WHERE trial_id = 1 ORDER BY attempt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, expected);

  auto store = *Store::Open(db, false, true);
  int attempt = 0;
  for (const auto& [outcome, name] : names) {
    std::optional<AttemptRow> row = *store->LoadAttempt(1, ++attempt);
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->outcome, outcome) << name;
    EXPECT_EQ(AttemptOutcomeName(outcome), name);
    EXPECT_EQ(ParseAttemptOutcome(name), outcome);
  }
  std::optional<AttemptRow> running = *store->LoadAttempt(1, attempt + 1);
  ASSERT_TRUE(running.has_value());
  EXPECT_EQ(running->outcome, v1::ATTEMPT_OUTCOME_UNSPECIFIED);
  EXPECT_FALSE(running->finished_at.has_value());
  EXPECT_EQ(ParseAttemptOutcome("LOST"), v1::ATTEMPT_OUTCOME_UNSPECIFIED);
  EXPECT_EQ(ParseAttemptOutcome("OUTCOME_UNSPECIFIED"), v1::ATTEMPT_OUTCOME_UNSPECIFIED);
}

}  // namespace
}  // namespace sextant
