#include "strategies/search_space.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

ParamSpec Float(std::string name, double min, double max, bool log = false) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.kind = ParamSpec::Kind::kFloat;
  spec.min = min;
  spec.max = max;
  spec.log = log;
  return spec;
}

ParamSpec Int(std::string name, double min, double max, bool log = false) {
  ParamSpec spec = Float(std::move(name), min, max, log);
  spec.kind = ParamSpec::Kind::kInt;
  return spec;
}

ParamSpec Categorical(std::string name, std::vector<std::string> values) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.kind = ParamSpec::Kind::kCategorical;
  spec.values = std::move(values);
  return spec;
}

const std::vector<double>& EdgeUs() {
  static const std::vector<double> kUs = {0.0,
                                          1e-300,
                                          0.25,
                                          0.5,
                                          std::nextafter(1.0, 0.0),
                                          1.0,
                                          -1.0,
                                          2.0,
                                          std::numeric_limits<double>::quiet_NaN(),
                                          std::numeric_limits<double>::infinity()};
  return kUs;
}

TEST(SearchSpaceTest, FloatFromUnitStaysWithinBoundsForAnyU) {
  for (const ParamSpec& spec : {Float("x", -3, 5), Float("lr", 1e-5, 1e-1, true)}) {
    for (double u : EdgeUs()) {
      const double x = std::get<double>(FromUnit(spec, u));
      EXPECT_GE(x, spec.min) << spec.name << " u=" << u;
      EXPECT_LE(x, spec.max) << spec.name << " u=" << u;
    }
  }
}

TEST(SearchSpaceTest, LinearFloatFromUnitInterpolatesBounds) {
  const ParamSpec spec = Float("x", 2, 6);
  EXPECT_DOUBLE_EQ(std::get<double>(FromUnit(spec, 0.0)), 2.0);
  EXPECT_DOUBLE_EQ(std::get<double>(FromUnit(spec, 0.25)), 3.0);
  EXPECT_DOUBLE_EQ(std::get<double>(FromUnit(spec, 0.5)), 4.0);
}

TEST(SearchSpaceTest, LogFloatFromUnitMapsMidpointToGeometricMean) {
  const ParamSpec spec = Float("lr", 1e-4, 1, /*log=*/true);
  EXPECT_NEAR(std::get<double>(FromUnit(spec, 0.5)), 1e-2, 1e-12);
  EXPECT_NEAR(std::get<double>(FromUnit(spec, 0.25)), 1e-3, 1e-13);
  EXPECT_DOUBLE_EQ(std::get<double>(FromUnit(spec, 0.0)), 1e-4);
}

TEST(SearchSpaceTest, IntFromUnitGivesEqualMassToEachInteger) {
  const ParamSpec spec = Int("n", 3, 7);
  std::map<int64_t, int> counts;
  constexpr int kSteps = 1000;
  for (int i = 0; i < kSteps; ++i) {
    ++counts[std::get<int64_t>(FromUnit(spec, (i + 0.5) / kSteps))];
  }
  ASSERT_EQ(counts.size(), 5u);
  for (int64_t k = 3; k <= 7; ++k) EXPECT_EQ(counts[k], kSteps / 5) << k;
}

TEST(SearchSpaceTest, IntFromUnitStaysWithinBoundsForAnyU) {
  for (const ParamSpec& spec : {Int("n", -4, 4), Int("batch", 16, 256, true)}) {
    for (double u : EdgeUs()) {
      const int64_t k = std::get<int64_t>(FromUnit(spec, u));
      EXPECT_GE(k, spec.min) << spec.name << " u=" << u;
      EXPECT_LE(k, spec.max) << spec.name << " u=" << u;
    }
  }
  EXPECT_EQ(std::get<int64_t>(FromUnit(Int("n", -4, 4), 0.0)), -4);
  EXPECT_EQ(std::get<int64_t>(FromUnit(Int("n", -4, 4), 1.0)), 4);
}

TEST(SearchSpaceTest, LogIntFromUnitIsMonotoneAndHitsEveryInteger) {
  const ParamSpec spec = Int("units", 1, 100, /*log=*/true);
  std::map<int64_t, int> counts;
  int64_t previous = 1;
  for (int i = 0; i < 100000; ++i) {
    const int64_t k = std::get<int64_t>(FromUnit(spec, i / 100000.0));
    EXPECT_GE(k, previous);
    previous = k;
    ++counts[k];
  }
  EXPECT_EQ(counts.size(), 100u);
  // Log spacing: small integers get far more mass than large ones.
  EXPECT_GT(counts[1], 10 * counts[100]);
}

TEST(SearchSpaceTest, CategoricalFromUnitSlicesEqually) {
  const ParamSpec spec = Categorical("opt", {"sgd", "adam", "lion"});
  EXPECT_EQ(std::get<std::string>(FromUnit(spec, 0.0)), "sgd");
  EXPECT_EQ(std::get<std::string>(FromUnit(spec, 0.33)), "sgd");
  EXPECT_EQ(std::get<std::string>(FromUnit(spec, 0.34)), "adam");
  EXPECT_EQ(std::get<std::string>(FromUnit(spec, 0.67)), "lion");
  EXPECT_EQ(std::get<std::string>(FromUnit(spec, 1.0)), "lion");
  EXPECT_EQ(std::get<std::string>(FromUnit(spec, -0.5)), "sgd");
  EXPECT_EQ(std::get<std::string>(FromUnit(spec, std::nan(""))), "sgd");
}

TEST(SearchSpaceTest, ToUnitInvertsFromUnit) {
  const ParamSpec linear = Float("x", -1, 3);
  const ParamSpec log = Float("lr", 1e-5, 1e-1, true);
  for (double u : {0.0, 0.1, 0.5, 0.9}) {
    EXPECT_NEAR(ToUnit(linear, FromUnit(linear, u)), u, 1e-12);
    EXPECT_NEAR(ToUnit(log, FromUnit(log, u)), u, 1e-12);
  }
  for (const ParamSpec& spec : {Int("n", -3, 9), Int("batch", 1, 300, true)}) {
    for (auto k = static_cast<int64_t>(spec.min); k <= spec.max; ++k) {
      const double u = ToUnit(spec, k);
      EXPECT_GT(u, 0.0);
      EXPECT_LT(u, 1.0);
      EXPECT_EQ(std::get<int64_t>(FromUnit(spec, u)), k) << spec.name;
    }
  }
  EXPECT_DOUBLE_EQ(ToUnit(Int("n", 0, 3), int64_t{0}), 0.125);
  const ParamSpec cat = Categorical("opt", {"sgd", "adam"});
  EXPECT_DOUBLE_EQ(ToUnit(cat, std::string("sgd")), 0.25);
  EXPECT_DOUBLE_EQ(ToUnit(cat, std::string("adam")), 0.75);
}

TEST(SearchSpaceTest, ToUnitReturnsHalfForValueOfWrongType) {
  EXPECT_EQ(ToUnit(Float("x", 0, 10), int64_t{1}), 0.5);
  EXPECT_EQ(ToUnit(Int("n", 0, 10), 1.0), 0.5);
  EXPECT_EQ(ToUnit(Categorical("c", {"a"}), 1.0), 0.5);
}

TEST(SearchSpaceTest, FormatParamValueUsesShortestRoundTripForm) {
  EXPECT_EQ(FormatParamValue(0.001), "0.001");
  EXPECT_EQ(FormatParamValue(3.5), "3.5");
  EXPECT_EQ(FormatParamValue(3.0), "3");
  EXPECT_EQ(FormatParamValue(-0.25), "-0.25");
  EXPECT_EQ(FormatParamValue(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(FormatParamValue(1e-5), "1e-05");
  EXPECT_EQ(FormatParamValue(int64_t{42}), "42");
  EXPECT_EQ(FormatParamValue(int64_t{-7}), "-7");
  EXPECT_EQ(FormatParamValue(std::string("adam w/ 0.9")), "adam w/ 0.9");
}

TEST(SearchSpaceTest, FormatParamValueRoundTripsArbitraryDoubles) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 10000; ++i) {
    const double x =
        std::ldexp(static_cast<double>(rng() >> 11), static_cast<int>(rng() % 80) - 100);
    const std::string s = FormatParamValue(x);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), x) << s;
    EXPECT_LE(s.size(), 24u) << s;
  }
}

TEST(SearchSpaceTest, IsActiveComparesFormattedValues) {
  ParamSpec momentum = Float("momentum", 0, 1);
  const Params sgd = {{"opt", std::string("sgd")}, {"lr", 0.5}, {"layers", int64_t{2}}};
  EXPECT_TRUE(IsActive(momentum, sgd));  // no conditions
  momentum.when = {{"opt", "sgd"}};
  EXPECT_TRUE(IsActive(momentum, sgd));
  momentum.when = {{"opt", "adam"}};
  EXPECT_FALSE(IsActive(momentum, sgd));
  momentum.when = {{"missing", "sgd"}};
  EXPECT_FALSE(IsActive(momentum, sgd));
  momentum.when = {{"opt", "sgd"}, {"lr", "0.5"}, {"layers", "2"}};
  EXPECT_TRUE(IsActive(momentum, sgd));
  momentum.when = {{"opt", "sgd"}, {"layers", "3"}};
  EXPECT_FALSE(IsActive(momentum, sgd));
}

TEST(SearchSpaceTest, FromUnitCubeOmitsInactiveConditionalParameters) {
  SearchSpace space;
  space.params.push_back(Categorical("opt", {"sgd", "adam"}));
  space.params.push_back(Float("momentum", 0, 1));
  space.params.back().when = {{"opt", "sgd"}};
  const std::vector<double> sgd = {0.1, 0.5};
  const std::vector<double> adam = {0.9, 0.5};
  EXPECT_EQ(FromUnitCube(space, sgd), (Params{{"opt", std::string("sgd")}, {"momentum", 0.5}}));
  EXPECT_EQ(FromUnitCube(space, adam), (Params{{"opt", std::string("adam")}}));
}

TEST(SearchSpaceTest, FromUnitCubeDropsChainedConditionalsInAnyOrder) {
  SearchSpace space;
  space.params.push_back(Float("nesterov_gamma", 0, 1));  // needs nesterov, listed first
  space.params.back().when = {{"nesterov", "yes"}};
  space.params.push_back(Categorical("nesterov", {"yes", "no"}));
  space.params.back().when = {{"opt", "sgd"}};
  space.params.push_back(Categorical("opt", {"sgd", "adam"}));
  // opt=adam leaves nesterov out, and with it nesterov_gamma though u says "yes".
  EXPECT_EQ(FromUnitCube(space, std::vector<double>{0.5, 0.1, 0.9}),
            (Params{{"opt", std::string("adam")}}));
  EXPECT_EQ(
      FromUnitCube(space, std::vector<double>{0.5, 0.1, 0.1}),
      (Params{
          {"opt", std::string("sgd")}, {"nesterov", std::string("yes")}, {"nesterov_gamma", 0.5}}));
}

TEST(SearchSpaceTest, IndexOfFindsParameterByName) {
  SearchSpace space;
  space.params = {Float("a", 0, 1), Int("b", 0, 1)};
  EXPECT_EQ(space.IndexOf("a"), 0);
  EXPECT_EQ(space.IndexOf("b"), 1);
  EXPECT_EQ(space.IndexOf("c"), -1);
}

// lr, width and act; depth only when act is relu.
SearchSpace ConditionalSpace() {
  SearchSpace space;
  space.params = {Float("lr", 1e-5, 1e-1, true), Int("width", 16, 256),
                  Categorical("act", {"relu", "tanh"}), Int("depth", 1, 4)};
  space.params[3].when = {{"act", "relu"}};
  return space;
}

TEST(CheckParamsTest, AcceptsAPointOfTheSpaceWithItsActiveParametersOnly) {
  const SearchSpace space = ConditionalSpace();
  EXPECT_TRUE(
      CheckParams(space, {{"lr", 0.001}, {"width", int64_t{256}}, {"act", std::string("tanh")}})
          .empty());
  std::vector<ParamProblem> p = CheckParams(space, {{"lr", int64_t{0}},
                                                    {"width", int64_t{16}},
                                                    {"act", std::string("relu")},
                                                    {"depth", int64_t{4}}});
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].message, "lr: 0 is below min 1e-05");
}

TEST(CheckParamsTest, NamesEachUnknownMissingInactiveAndOutOfRangeParameter) {
  const SearchSpace space = ConditionalSpace();
  std::vector<ParamProblem> p = CheckParams(
      space, {{"lr", 0.5}, {"act", std::string("tanh")}, {"depth", int64_t{2}}, {"mom", 0.9}});
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].kind, ParamProblem::Kind::kOutside);
  EXPECT_EQ(p[0].message, "lr: 0.5 is above max 0.1");
  EXPECT_EQ(p[1].kind, ParamProblem::Kind::kMissing);
  EXPECT_EQ(p[1].param, "width");
  EXPECT_EQ(p[2].kind, ParamProblem::Kind::kInactive);
  EXPECT_EQ(p[2].param, "depth");
  EXPECT_EQ(p[3].kind, ParamProblem::Kind::kUnknown);
  EXPECT_EQ(p[3].message, "mom: not a parameter of this space");
}

TEST(CheckParamsTest, RejectsValuesOfTheWrongType) {
  const SearchSpace space = ConditionalSpace();
  std::vector<ParamProblem> p = CheckParams(
      space, {{"lr", std::string("fast")}, {"width", 64.5}, {"act", std::string("gelu")}});
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].message, "lr: expected a number, got 'fast'");
  EXPECT_EQ(p[1].message, "width: expected an integer, got 64.5");
  EXPECT_EQ(p[2].message, "act: 'gelu' is not one of relu, tanh");
}

}  // namespace
}  // namespace sextant
