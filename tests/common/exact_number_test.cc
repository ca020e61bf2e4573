#include "common/exact_number.h"

#include <cmath>
#include <limits>

#include "absl/strings/numbers.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

TEST(ExactNumberTest, ReadsBackAsTheSameDouble) {
  for (double v : {-3.274409774458036, 0.1, 1.0 / 3, 1796367326.123456, 5e-324, 1e300, 0.0}) {
    double back = 0;
    ASSERT_TRUE(absl::SimpleAtod(ExactNumber(v), &back)) << ExactNumber(v);
    EXPECT_EQ(back, v) << ExactNumber(v);
  }
  EXPECT_EQ(ExactNumber(-3.274409774458036), "-3.274409774458036");
  EXPECT_EQ(ExactNumber(0.5), "0.5");
  EXPECT_EQ(ExactNumber(std::nan("")), "nan");
  EXPECT_EQ(ExactNumber(-std::numeric_limits<double>::infinity()), "-inf");
}

TEST(ExactNumberTest, UnixTimesKeepTheirMicroseconds) {
  const double t = 1796367326.123456;
  EXPECT_EQ(UnixSecondsText(t), "1796367326.123456");
  std::optional<double> back = ParseUnixSeconds(UnixSecondsText(t));
  ASSERT_TRUE(back.has_value());
  EXPECT_NEAR(*back, t, 0.5e-6);
  // Whole seconds (as older versions wrote the start) are exact too.
  EXPECT_EQ(ParseUnixSeconds("1796367326"), 1796367326.0);
  // Six significant digits cannot name the second: the caller derives the time anew.
  EXPECT_FALSE(ParseUnixSeconds("1.79636e+09").has_value());
  EXPECT_FALSE(ParseUnixSeconds("soon").has_value());
  // Small times (a fake clock's) are what they say.
  EXPECT_EQ(ParseUnixSeconds("12.5"), 12.5);
}

}  // namespace
}  // namespace sextant
