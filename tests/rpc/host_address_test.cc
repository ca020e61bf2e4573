#include "rpc/host_address.h"

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(HostAddressTest, DialTargetKeepsTheListenHostAndTakesLoopbackForAWildcard) {
  EXPECT_EQ(DialTarget("10.1.2.3:0", 4711), "10.1.2.3:4711");
  EXPECT_EQ(DialTarget("orchestrator.example:0", 5), "orchestrator.example:5");
  EXPECT_EQ(DialTarget("[fd00::1]:0", 5), "[fd00::1]:5");
  EXPECT_EQ(DialTarget("0.0.0.0:0", 7), "127.0.0.1:7");
  EXPECT_EQ(DialTarget("[::]:9000", 9000), "127.0.0.1:9000");
  EXPECT_EQ(DialTarget(":0", 8), "127.0.0.1:8");
}

TEST(HostAddressTest, TowardLoopbackTheLocalAddressIsLoopback) {
  absl::StatusOr<std::string> a = LocalAddressToward("127.0.0.1:1");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, "127.0.0.1");
  absl::StatusOr<std::string> other = LocalAddressToward("127.0.0.9:80");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->rfind("127.", 0), 0u) << *other;
  absl::StatusOr<std::string> named = LocalAddressToward("localhost:80");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_TRUE(*named == "127.0.0.1" || *named == "[::1]") << *named;
}

TEST(HostAddressTest, BadTargetsAreErrorsNamingThem) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", ":80", ""}) {
    absl::StatusOr<std::string> a = LocalAddressToward(bad);
    EXPECT_FALSE(a.ok()) << bad;
    EXPECT_NE(a.status().message().find("is not HOST:PORT"), std::string::npos) << a.status();
  }
  absl::StatusOr<std::string> unknown = LocalAddressToward("no-such-host.invalid:80");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no-such-host.invalid:80"), std::string::npos)
      << unknown.status();
}

TEST(HostAddressTest, AutoListensOnThisHostsAddressTowardItsUpstream) {
  absl::StatusOr<std::string> l = ResolveListen("auto:4242", "127.0.0.1:7000");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(*l, "127.0.0.1:4242");
  l = ResolveListen("auto:0", "127.0.0.1:7000");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(*l, "127.0.0.1:0");
  l = ResolveListen("10.9.8.7:0", "127.0.0.1:7000");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(*l, "10.9.8.7:0");
  l = ResolveListen("auto:0", "no-such-host.invalid:1");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("--listen auto:0"), std::string::npos) << l.status();
}

}  // namespace
}  // namespace sextant
