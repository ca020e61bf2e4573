#include "orchestrator/core/sqlite_db.h"

#include <cmath>
#include <optional>
#include <string>

#include "gtest/gtest.h"

namespace sextant {
namespace {

std::unique_ptr<SqliteDb> Memory() {
  auto db = SqliteDb::Open(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  EXPECT_TRUE(db.ok()) << db.status();
  EXPECT_TRUE((*db)->Exec("CREATE TABLE t(i INTEGER, r REAL, s TEXT, b BLOB, n REAL)").ok());
  return *std::move(db);
}

// Every kind of value goes in as its column's type and reads back as it went in: integers
// (and bools), reals, text, bytes with a NUL inside, and an empty optional as NULL.
TEST(SqliteDbTest, EveryKindOfValueBindsAndReadsBackAsItWentIn) {
  std::unique_ptr<SqliteDb> db = Memory();
  const std::string bytes("a\0b", 3);
  ASSERT_TRUE(db->Run("insert", "INSERT INTO t VALUES(?, ?, ?, ?, ?)", int64_t{1} << 40, 2.5,
                      std::string("text"), Blob{bytes}, std::optional<double>())
                  .ok());
  ASSERT_TRUE(db->Run("insert", "INSERT INTO t VALUES(?, ?, ?, ?, ?)", true, -0.25, "literal",
                      Blob{""}, std::optional<double>(7.5))
                  .ok());
  auto q = db->Query("SELECT i, r, s, b, n, typeof(i), typeof(s), typeof(b) FROM t ORDER BY r");
  ASSERT_TRUE(q.ok()) << q.status();
  auto row = q->Next("read");
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(q->Int(0), 1);
  EXPECT_EQ(q->Real(1), -0.25);
  EXPECT_EQ(q->Text(2), "literal");
  EXPECT_EQ(q->Bytes(3), "");
  EXPECT_EQ(q->MaybeReal(4), std::optional<double>(7.5));
  row = q->Next("read");
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(q->Int(0), int64_t{1} << 40);
  EXPECT_EQ(q->Real(1), 2.5);
  EXPECT_EQ(q->Text(2), "text");
  EXPECT_EQ(q->Bytes(3), bytes);
  EXPECT_EQ(q->MaybeReal(4), std::nullopt);
  EXPECT_EQ(q->Text(5), "integer");
  EXPECT_EQ(q->Text(6), "text");
  EXPECT_EQ(q->Text(7), "blob");
  row = q->Next("read");
  ASSERT_TRUE(row.ok());
  EXPECT_FALSE(*row);
}

// A statement is reset when its use ends: the same cached statement serves the next use from
// its first row, with new parameters, even when the last use stopped before its end.
TEST(SqliteDbTest, TheCachedStatementStartsAfreshOnEachUse) {
  std::unique_ptr<SqliteDb> db = Memory();
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(db->Run("insert", "INSERT INTO t(i) VALUES(?)", i).ok());
    EXPECT_EQ(db->Changes(), 1);
  }
  for (int64_t above : {0, 1, 2}) {
    auto q = db->Query("SELECT i FROM t WHERE i > ? ORDER BY i", above);
    ASSERT_TRUE(q.ok()) << q.status();
    auto row = q->Next("read");
    ASSERT_TRUE(row.ok() && *row);
    EXPECT_EQ(q->Int(0), above + 1);  // one row read, then the use ends
  }
}

// A failing statement names what it did, with SQLite's reason; one that cannot be prepared
// says so; a rolled-back transaction leaves nothing.
TEST(SqliteDbTest, FailuresNameWhatFailedAndRollbackLeavesNothing) {
  std::unique_ptr<SqliteDb> db = Memory();
  ASSERT_TRUE(db->Exec("CREATE TABLE u(k TEXT PRIMARY KEY)").ok());
  ASSERT_TRUE(db->Run("add key", "INSERT INTO u VALUES(?)", "a").ok());
  absl::Status twice = db->Run("add key", "INSERT INTO u VALUES(?)", "a");
  EXPECT_EQ(twice.code(), absl::StatusCode::kInternal);
  EXPECT_NE(twice.message().find("store: add key: UNIQUE constraint failed"), std::string::npos)
      << twice;
  auto bad = db->Query("SELECT nothing FROM nowhere");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("prepare"), std::string::npos) << bad.status();
  ASSERT_TRUE(db->Exec("BEGIN IMMEDIATE").ok());
  EXPECT_TRUE(db->InTransaction());
  ASSERT_TRUE(db->Run("add key", "INSERT INTO u VALUES(?)", "b").ok());
  ASSERT_TRUE(db->Exec("ROLLBACK").ok());
  EXPECT_FALSE(db->InTransaction());
  auto count = db->Query("SELECT COUNT(*) FROM u");
  ASSERT_TRUE(count.ok());
  auto counted = count->Next("count");
  ASSERT_TRUE(counted.ok() && *counted);
  EXPECT_EQ(count->Int(0), 1);
}

}  // namespace
}  // namespace sextant
