#include "common/error_line.h"

#include <string>

#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(ErrorLineTest, KeepsTheFirstLineAndTheCauseAtTheEnd) {
  EXPECT_EQ(ErrorLine("client command exited with status 1; stderr: Traceback (most recent "
                      "call last):\n  File \"client.py\", line 3\nModuleNotFoundError: No module "
                      "named 'torch'\n\n"),
            "client command exited with status 1; stderr: Traceback (most recent call last): | "
            "ModuleNotFoundError: No module named 'torch'");
  EXPECT_EQ(ErrorLine("exited with status 2"), "exited with status 2");
  EXPECT_EQ(ErrorLine(""), "");
}

TEST(ErrorLineTest, CutsALongLine) {
  const std::string line = ErrorLine(std::string(1000, 'x'), 40);
  EXPECT_EQ(line.size(), 40u);
  EXPECT_EQ(line.substr(37), "...");
}

}  // namespace
}  // namespace sextant
