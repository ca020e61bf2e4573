// The places of a region's clients started by hand: given by name, kept in a file across
// restarts, and translated both ways between place ids and the clients' own ids.
#include "aggregator/client_roster.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace sextant {
namespace {

class ClientRosterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sextant-roster-XXXXXX";
    dir_ = mkdtemp(tmpl);
    file_ = dir_ + "/clients.txt";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_, file_;
};

TEST_F(ClientRosterTest, NamedClientsTakeTheLowestFreePlaceAndAnIndexNameItsOwn) {
  auto roster = ClientRoster::Open("eu", 3, "exp", file_);
  ASSERT_TRUE(roster.ok()) << roster.status();
  ClientRoster& r = **roster;
  EXPECT_EQ(*r.Join("site-a"), 0);
  EXPECT_EQ(*r.Join("2"), 2);       // an index names its own place
  EXPECT_EQ(*r.Join("site-a"), 0);  // joining again keeps the place
  EXPECT_EQ(*r.Join("0"), 1);       // its place is held: the lowest free one
  EXPECT_EQ(r.held(), 3);
  const absl::StatusOr<int64_t> full = r.Join("site-z");
  EXPECT_TRUE(absl::IsResourceExhausted(full.status())) << full.status();
  EXPECT_EQ(r.Holder("eu/0"), "eu/site-a");
  EXPECT_EQ(r.Holder("eu/1"), "eu/0");
  EXPECT_EQ(r.PlaceOf("eu/site-a"), "eu/0");
  EXPECT_EQ(r.PlaceOf("eu/0"), "eu/1");
  EXPECT_EQ(r.PlaceOf("us/site-a"), "us/site-a");  // another region's id is left as it is
}

TEST_F(ClientRosterTest, PlacesAreUnheldUntilJoinedAndKeptAcrossARestart) {
  {
    auto roster = ClientRoster::Open("eu", 2, "exp", file_);
    ASSERT_TRUE(roster.ok());
    EXPECT_EQ((*roster)->Holder("eu/1"), "eu/1");
    ASSERT_EQ(*(*roster)->Join("site-b"), 0);
    ASSERT_EQ(*(*roster)->Join("site-a"), 1);
  }
  auto again = ClientRoster::Open("eu", 2, "exp", file_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->held(), 2);
  EXPECT_EQ(*(*again)->Join("site-a"), 1);
  EXPECT_EQ((*again)->Holder("eu/0"), "eu/site-b");
}

TEST_F(ClientRosterTest, ABrokenFileIsRefusedNamingItsLine) {
  for (const char* bad : {"0 site-a\n0 site-b\n", "0 site-a\n5 site-b\n", "0 site-a\n1 site-a\n",
                          "0 site-a\nnonsense\n", "0 site-a\n1 ../x\n"}) {
    std::ofstream(file_) << "experiment exp\n" << bad;
    auto roster = ClientRoster::Open("eu", 3, "exp", file_);
    ASSERT_FALSE(roster.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(roster.status()));
    EXPECT_NE(roster.status().message().find(file_ + ":3:"), std::string::npos) << roster.status();
  }
}

TEST_F(ClientRosterTest, AnotherRunsPlacesAreRefusedNamingTheFile) {
  {
    auto roster = ClientRoster::Open("eu", 2, "old-run", file_);
    ASSERT_TRUE(roster.ok());
    ASSERT_TRUE((*roster)->Join("site-a").ok());
  }
  auto roster = ClientRoster::Open("eu", 2, "exp", file_);
  ASSERT_FALSE(roster.ok());
  EXPECT_NE(roster.status().message().find(file_ + ":1: the places of another run"),
            std::string::npos)
      << roster.status();
}

TEST_F(ClientRosterTest, AFileThatCannotBeWrittenTakesNoPlace) {
  auto roster = ClientRoster::Open("eu", 2, "exp", dir_ + "/missing/clients.txt");
  ASSERT_TRUE(roster.ok());
  EXPECT_TRUE(absl::IsUnavailable((*roster)->Join("site-a").status()));
  EXPECT_EQ((*roster)->held(), 0);
}

}  // namespace
}  // namespace sextant
