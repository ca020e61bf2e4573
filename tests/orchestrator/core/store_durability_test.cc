// A power cut in the middle of a commit: the store's files are copied as they are on disk at
// one moment (the database and its WAL, not the shared-memory index, which lives in RAM) and
// the WAL's tail is torn. The copy must open and hold exactly a prefix of the commits: every
// commit whose frames reached the disk whole, nothing half-written.
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "orchestrator/core/store.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using testing::MakeTempDir;

constexpr int kCommits = 12;

// One acknowledged state change: a trial row and its measurement, in one transaction.
void CommitTrial(Store& store, int64_t id) {
  ASSERT_TRUE(store.Begin().ok());
  TrialRow row;
  row.id = id;
  row.state = v1::COMPLETED;
  row.params_json = absl::StrCat("{\"x\":", id, ",\"pad\":\"", std::string(300, 'p'), "\"}");
  row.attempts = 1;
  row.value = static_cast<double>(id);
  ASSERT_TRUE(store.PutTrial(row).ok());
  MeasurementRow m;
  m.trial_id = id;
  m.attempt = 1;
  m.sequence = 1;
  m.metrics_json = absl::StrCat("{\"loss\":", id, "}");
  ASSERT_TRUE(store.AddMeasurement(m).ok());
  ASSERT_TRUE(store.Commit().ok());
}

// Opens a copy of db + the first wal_bytes of its WAL; returns how many commits it holds,
// checking that they are exactly trials 1..k with their measurements.
int RecoveredPrefix(const std::string& dir, const std::string& db, const std::string& wal,
                    uintmax_t wal_bytes) {
  std::string copy = absl::StrCat(dir, "/copy-", wal_bytes);
  std::filesystem::create_directories(copy);
  std::filesystem::copy_file(db, copy + "/state.db");
  std::filesystem::copy_file(wal, copy + "/state.db-wal");
  std::filesystem::resize_file(copy + "/state.db-wal", wal_bytes);
  auto store = Store::Open(copy + "/state.db", /*create=*/false);
  EXPECT_TRUE(store.ok()) << wal_bytes << ": " << store.status();
  if (!store.ok()) return -1;
  auto trials = (*store)->LoadTrials();
  auto ms = (*store)->LoadMeasurements();
  EXPECT_TRUE(trials.ok() && ms.ok());
  if (!trials.ok() || !ms.ok()) return -1;
  EXPECT_EQ(trials->size(), ms->size()) << "a commit was split at " << wal_bytes;
  for (size_t i = 0; i < trials->size(); ++i) {
    EXPECT_EQ((*trials)[i].id, static_cast<int64_t>(i + 1));
    EXPECT_EQ((*trials)[i].value, static_cast<double>(i + 1));
  }
  return static_cast<int>(trials->size());
}

TEST(StoreDurabilityTest, TornWalTailLosesOnlyTheUnfinishedCommit) {
  std::string dir = MakeTempDir("durability");
  std::string db = dir + "/state.db";
  auto opened = Store::Open(db, /*create=*/true);
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<Store> store = *std::move(opened);
  ASSERT_TRUE(store->PutMeta("spec", "x").ok());
  // The schema and meta were committed before: copy the files at the first trial's "power cut"
  // to learn how big the WAL was then.
  uintmax_t before_trials = std::filesystem::file_size(db + "-wal");
  std::vector<uintmax_t> wal_after;  // WAL size after each acknowledged commit
  for (int id = 1; id <= kCommits; ++id) {
    CommitTrial(*store, id);
    wal_after.push_back(std::filesystem::file_size(db + "-wal"));
  }
  // The moment of the cut: the files as the disk has them, while the store is still open.
  std::string frozen = dir + "/frozen";
  std::filesystem::create_directories(frozen);
  std::filesystem::copy_file(db, frozen + "/state.db");
  std::filesystem::copy_file(db + "-wal", frozen + "/state.db-wal");
  store.reset();
  const uintmax_t full = wal_after.back();
  ASSERT_GT(full, before_trials);

  // Whole WAL: every acknowledged commit is there.
  EXPECT_EQ(RecoveredPrefix(dir, frozen + "/state.db", frozen + "/state.db-wal", full), kCommits);
  // Torn by one byte, or half of the last commit's frames: only that commit is lost.
  EXPECT_EQ(RecoveredPrefix(dir, frozen + "/state.db", frozen + "/state.db-wal", full - 1),
            kCommits - 1);
  uintmax_t last_start = wal_after[kCommits - 2];
  EXPECT_EQ(RecoveredPrefix(dir, frozen + "/state.db", frozen + "/state.db-wal",
                            last_start + (full - last_start) / 2),
            kCommits - 1);
  // Any cut point: a prefix of the commits, never fewer than those whose frames are whole.
  int previous = 0;
  for (uintmax_t cut = before_trials; cut <= full; cut += 997) {
    int k = RecoveredPrefix(dir, frozen + "/state.db", frozen + "/state.db-wal", cut);
    int whole = 0;
    while (whole < kCommits && wal_after[whole] <= cut) ++whole;
    EXPECT_EQ(k, whole) << "cut at " << cut;
    EXPECT_GE(k, previous);
    previous = k;
  }
}

TEST(StoreDurabilityTest, StoreIsInWalModeForEveryLaterConnection) {
  std::string dir = MakeTempDir("durability-mode");
  auto store = Store::Open(dir + "/state.db", /*create=*/true);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->PutMeta("k", "v").ok());
  // journal_mode=WAL is persistent: a plain SQLite connection (a reader) finds it set.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2((dir + "/state.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &stmt, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)), "wal");
  sqlite3_finalize(stmt);
  sqlite3_close(db);
}

}  // namespace
}  // namespace sextant
