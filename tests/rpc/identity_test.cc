#include "rpc/identity.h"

#include <unistd.h>
#include <filesystem>
#include <string>

#include "common/read_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/certificates.h"
#include "rpc/server_security.h"

namespace sextant {
namespace {

using ::testing::HasSubstr;

TEST(IdentityTest, IdsAreBoundedAndPlain) {
  EXPECT_TRUE(IsValidId("eu-west_1.a"));
  EXPECT_TRUE(IsValidId(std::string(kMaxIdBytes, 'a')));
  EXPECT_FALSE(IsValidId(std::string(kMaxIdBytes + 1, 'a')));
  EXPECT_FALSE(IsValidId(""));
  EXPECT_FALSE(IsValidId("a/b"));
  EXPECT_FALSE(IsValidId("../x"));
  EXPECT_FALSE(IsValidId(std::string("a\0b", 3)));
  absl::Status long_id = CheckId("client_id", std::string(8 << 20, 'x'));
  EXPECT_EQ(long_id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(long_id.message(), HasSubstr("8388608 bytes; at most 128"));
  EXPECT_LT(long_id.message().size(), 200u);  // the id itself is not echoed
  EXPECT_THAT(CheckId("NAME", "../x").message(), HasSubstr("must start with a letter or digit"));
  EXPECT_THAT(CheckId("NAME", "a/b").message(), HasSubstr("holds '/'"));
  EXPECT_FALSE(IsValidId(".."));
  EXPECT_FALSE(IsValidId("-rf"));
}

TEST(IdentityTest, ClientIdsAreRegionSlashName) {
  EXPECT_TRUE(CheckClientId("client_id", "eu/0").ok());
  EXPECT_FALSE(CheckClientId("client_id", "eu").ok());
  EXPECT_FALSE(CheckClientId("client_id", "eu/0/1").ok());
  EXPECT_FALSE(CheckClientId("client_id", "/0").ok());
  EXPECT_FALSE(CheckClientId("client_id", std::string(100, 'a') + "/" + std::string(40, 'b')).ok());
}

TEST(IdentityTest, UriRoundTripsAndRejectsMalformedOnes) {
  const PeerIdentity client{Role::kClient, "eu", "alice"};
  EXPECT_EQ(IdentityUri(client), "sextant://client/eu/alice");
  EXPECT_EQ(*ParseIdentityUri("sextant://client/eu/alice"), client);
  const PeerIdentity admin{Role::kAdmin, "", "ops"};
  EXPECT_EQ(IdentityUri(admin), "sextant://admin/-/ops");
  EXPECT_EQ(*ParseIdentityUri(IdentityUri(admin)), admin);
  for (const char* bad :
       {"https://client/eu/a", "sextant://root/eu/a", "sextant://client/eu", "sextant://client/-/a",
        "sextant://client/eu/a/b", "sextant://client/e u/a"}) {
    EXPECT_FALSE(ParseIdentityUri(bad).ok()) << bad;
  }
}

TEST(IdentityTest, CertificatesCarryTheirIdentity) {
  auto ca = CreateCertificateAuthority("test CA", 1);
  ASSERT_TRUE(ca.ok());
  const PeerIdentity id{Role::kAggregator, "us-east", "agg-1"};
  auto cert = IssueCertificate(*ca, "agg-1", {"agg1.example.org", "10.0.0.7", "::1"}, 1, &id);
  ASSERT_TRUE(cert.ok()) << cert.status();
  auto read = IdentityFromCertificate(cert->cert_pem);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, id);
  auto plain = IssueCertificate(*ca, "old", {}, 1);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(IdentityFromCertificate(plain->cert_pem).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(IdentityFromCertificate("garbage").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(IssueCertificate(*ca, "x", {"bad host!"}, 1).ok());
  EXPECT_FALSE(IssueCertificate(*ca, "x", {"-leading.example"}, 1).ok());
}

TEST(IdentityTest, LoopbackMeansAnAddressNotAPrefix) {
  for (const char* yes : {"127.0.0.1:7070", "127.1.2.3:0", "localhost:80", "[::1]:9"}) {
    EXPECT_TRUE(IsLoopbackAddress(yes)) << yes;
  }
  for (const char* no :
       {"127.evil.com:80", "127.0.0.1.evil.com:80", "0.0.0.0:7070", "10.0.0.1:1",
        "localhost.evil:1", "127.0.0.1", "127.0.0.1:x", "[::2]:1", "localhost:99999"}) {
    EXPECT_FALSE(IsLoopbackAddress(no)) << no;
  }
}

class IssueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/issue-" + std::to_string(getpid());
    std::filesystem::remove_all(dir_);
    ASSERT_TRUE(InitCertificateDirectory(dir_, {"orch.example.org", "192.0.2.10"}).ok());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(IssueTest, PerHostCertificatesNameTheirRoleRegionAndHost) {
  IssueOptions o;
  o.role = Role::kClient;
  o.region = "eu";
  o.sans = {"alice.example.org"};
  ASSERT_TRUE(IssueIntoDirectory(dir_, "alice", o).ok());
  auto id = IdentityFromCertificate(*ReadFileIfPresent(dir_ + "/alice.pem"));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, (PeerIdentity{Role::kClient, "eu", "alice"}));
  // A second issue under the same name would replace a key in use: refused.
  EXPECT_EQ(IssueIntoDirectory(dir_, "alice", o).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(IssueTest, NamesThatWouldBecomeOtherPathsAreRefused) {
  IssueOptions o;
  for (const char* bad : {"../x", "a/b", "", ".hidden/..", "ca"}) {
    absl::Status s = IssueIntoDirectory(dir_, bad, o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/../x.pem"));
  o.role = Role::kAggregator;
  EXPECT_THAT(IssueIntoDirectory(dir_, "agg", o).message(), HasSubstr("--region is required"));
  o.region = "../r";
  EXPECT_EQ(IssueIntoDirectory(dir_, "agg", o).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant
