#include "common/process_setup.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(ProcessSetupTest, GrpcResolvesNamesAsTheSystemDoesUnlessTheEnvironmentChose) {
  ::unsetenv("GRPC_DNS_RESOLVER");
  SetUpProcess();
  ASSERT_NE(std::getenv("GRPC_DNS_RESOLVER"), nullptr);
  EXPECT_EQ(std::string(std::getenv("GRPC_DNS_RESOLVER")), "native");
  ::setenv("GRPC_DNS_RESOLVER", "ares", 1);
  SetUpProcess();
  EXPECT_EQ(std::string(std::getenv("GRPC_DNS_RESOLVER")), "ares");
  ::unsetenv("GRPC_DNS_RESOLVER");
}

}  // namespace
}  // namespace sextant
