#include "common/metric_parser.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

TEST(MetricParserTest, ParsesWhitespaceAndCommaSeparatedPairs) {
  ParsedLine parsed = ParseMetricLine("epoch=3 val_loss=0.412,accuracy=0.871\tlr=1e-3, x=2");
  EXPECT_THAT(parsed.metrics,
              ElementsAre(Pair("accuracy", 0.871), Pair("epoch", 3.0), Pair("lr", 1e-3),
                          Pair("val_loss", 0.412), Pair("x", 2.0)));
  EXPECT_EQ(parsed.ignored_tokens, 0);
}

TEST(MetricParserTest, SkipsProseSilently) {
  ParsedLine parsed = ParseMetricLine("Epoch 3 finished: loss=0.5 (best so far)");
  EXPECT_THAT(parsed.metrics, ElementsAre(Pair("loss", 0.5)));
  EXPECT_EQ(parsed.ignored_tokens, 0);
  EXPECT_THAT(ParseMetricLine("no metrics here at all").metrics, IsEmpty());
  EXPECT_THAT(ParseMetricLine("").metrics, IsEmpty());
  EXPECT_THAT(ParseMetricLine(" ,\t, ").metrics, IsEmpty());
}

TEST(MetricParserTest, CountsTokensThatAreNotNameEqualsNumber) {
  ParsedLine parsed =
      ParseMetricLine("loss=abc acc=0.5 x=1.2.3 y= =4 z=0.5abc w=1e v=--1 u=0x t=nan(1) ====");
  EXPECT_THAT(parsed.metrics, ElementsAre(Pair("acc", 0.5)));
  EXPECT_EQ(parsed.ignored_tokens, 10);
}

TEST(MetricParserTest, AcceptsNanAndInfinitiesInAnyCase) {
  ParsedLine parsed = ParseMetricLine("a=nan b=NaN c=inf d=-inf e=+INF f=-Inf");
  ASSERT_EQ(parsed.metrics.size(), 6u);
  EXPECT_TRUE(std::isnan(parsed.metrics["a"]));
  EXPECT_TRUE(std::isnan(parsed.metrics["b"]));
  EXPECT_EQ(parsed.metrics["c"], INFINITY);
  EXPECT_EQ(parsed.metrics["d"], -INFINITY);
  EXPECT_EQ(parsed.metrics["e"], INFINITY);
  EXPECT_EQ(parsed.metrics["f"], -INFINITY);
  EXPECT_EQ(parsed.ignored_tokens, 0);
}

TEST(MetricParserTest, AcceptsSignsExponentsAndHexFloats) {
  ParsedLine parsed =
      ParseMetricLine("a=0x1.8p1 b=-2.5E+2 c=.5 d=+7 e=0xff f=-0x10 g=0 h=1e999 i=-1e999");
  EXPECT_EQ(parsed.ignored_tokens, 0);
  EXPECT_EQ(parsed.metrics["a"], 3.0);
  EXPECT_EQ(parsed.metrics["b"], -250.0);
  EXPECT_EQ(parsed.metrics["c"], 0.5);
  EXPECT_EQ(parsed.metrics["d"], 7.0);
  EXPECT_EQ(parsed.metrics["e"], 255.0);
  EXPECT_EQ(parsed.metrics["f"], -16.0);
  EXPECT_EQ(parsed.metrics["g"], 0.0);
  EXPECT_EQ(parsed.metrics["h"], INFINITY);
  EXPECT_EQ(parsed.metrics["i"], -INFINITY);
}

TEST(MetricParserTest, AcceptsNamesWithPunctuationAfterTheFirstChar) {
  ParsedLine parsed = ParseMetricLine("_ok=1 val/loss:top-1.avg=2 1abc=3 -lr=0.1 a+b=4");
  EXPECT_THAT(parsed.metrics, ElementsAre(Pair("_ok", 1.0), Pair("val/loss:top-1.avg", 2.0)));
  EXPECT_EQ(parsed.ignored_tokens, 3);
}

TEST(MetricParserTest, RejectsNamesLongerThan128Chars) {
  std::string ok(128, 'n');
  std::string too_long(129, 'n');
  ParsedLine parsed = ParseMetricLine(ok + "=1 " + too_long + "=2");
  EXPECT_THAT(parsed.metrics, ElementsAre(Pair(ok, 1.0)));
  EXPECT_EQ(parsed.ignored_tokens, 1);
}

TEST(MetricParserTest, LaterDuplicateWins) {
  EXPECT_THAT(ParseMetricLine("loss=1 loss=2").metrics, ElementsAre(Pair("loss", 2.0)));
}

TEST(MetricParserTest, IgnoresCarriageReturnFromCrlfOutput) {
  ParsedLine parsed = ParseMetricLine("loss=0.25\r");
  EXPECT_THAT(parsed.metrics, ElementsAre(Pair("loss", 0.25)));
  EXPECT_EQ(parsed.ignored_tokens, 0);
}

TEST(MetricParserTest, BinaryGarbageIsHarmless) {
  constexpr char kBytes[] = "\x01\xff=\x00=1 \xfe\x80loss=2 a=\x00";
  std::string garbage(kBytes, sizeof(kBytes) - 1);
  ParsedLine parsed = ParseMetricLine(garbage);
  EXPECT_EQ(parsed.metrics.size(), 0u);
  EXPECT_GE(parsed.ignored_tokens, 1);
}

}  // namespace
}  // namespace sextant
