#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"
#include "tests/strategies/sampler_test_util.h"

namespace sextant {
namespace {

using testing::At;

ParamSpec Spec(std::string name, ParamSpec::Kind kind, double min, double max, bool log = false,
               int grid_points = 0) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.kind = kind;
  spec.min = min;
  spec.max = max;
  spec.log = log;
  spec.grid_points = grid_points;
  return spec;
}

ParamSpec Categorical(std::string name, std::vector<std::string> values) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.kind = ParamSpec::Kind::kCategorical;
  spec.values = std::move(values);
  return spec;
}

// Asks for trials 0, 1, ... until the sampler says OutOfRange (at most `limit` trials).
std::vector<Params> Enumerate(Sampler& sampler, int limit = 10000) {
  std::vector<Params> out;
  for (int i = 0; i < limit; ++i) {
    absl::StatusOr<Params> p = sampler.Ask(At(i));
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), absl::StatusCode::kOutOfRange) << p.status();
      break;
    }
    out.push_back(*p);
  }
  return out;
}

// The values one parameter takes over a grid with that parameter alone.
std::vector<ParamValue> Axis(const ParamSpec& spec) {
  SearchSpace space;
  space.params.push_back(spec);
  auto sampler = NewGridSampler(space);
  std::vector<ParamValue> out;
  for (const Params& p : Enumerate(*sampler)) out.push_back(p.at(spec.name));
  return out;
}

TEST(GridSamplerTest, EnumeratesCartesianProductWithFirstParameterSlowest) {
  SearchSpace space;
  space.params.push_back(Categorical("opt", {"sgd", "adam"}));
  space.params.push_back(Spec("layers", ParamSpec::Kind::kInt, 1, 3));
  auto sampler = NewGridSampler(space);
  const std::vector<Params> expected = {
      {{"opt", std::string("sgd")}, {"layers", int64_t{1}}},
      {{"opt", std::string("sgd")}, {"layers", int64_t{2}}},
      {{"opt", std::string("sgd")}, {"layers", int64_t{3}}},
      {{"opt", std::string("adam")}, {"layers", int64_t{1}}},
      {{"opt", std::string("adam")}, {"layers", int64_t{2}}},
      {{"opt", std::string("adam")}, {"layers", int64_t{3}}},
  };
  EXPECT_EQ(Enumerate(*sampler), expected);
  EXPECT_EQ(sampler->Ask(At(6)).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(sampler->Ask(At(100)).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(GridSamplerTest, ThreeParameterProductHoldsEveryCombinationOnce) {
  SearchSpace space;
  space.params.push_back(Categorical("a", {"x", "y"}));
  space.params.push_back(Spec("b", ParamSpec::Kind::kInt, 0, 2));
  space.params.push_back(Spec("c", ParamSpec::Kind::kFloat, 0, 1));
  auto sampler = NewGridSampler(space);
  const std::vector<Params> points = Enumerate(*sampler);
  ASSERT_EQ(points.size(), 2u * 3u * 5u);
  EXPECT_EQ(std::set<Params>(points.begin(), points.end()).size(), points.size());
  // The last parameter varies fastest.
  EXPECT_EQ(points[0].at("c"), ParamValue(0.0));
  EXPECT_EQ(points[1].at("c"), ParamValue(0.25));
  EXPECT_EQ(points[5].at("b"), ParamValue(int64_t{1}));
  EXPECT_EQ(points[15].at("a"), ParamValue(std::string("y")));
}

TEST(GridSamplerTest, FloatAxisHasFiveEvenlySpacedPointsIncludingEndpoints) {
  EXPECT_EQ(Axis(Spec("x", ParamSpec::Kind::kFloat, 0, 1)),
            (std::vector<ParamValue>{0.0, 0.25, 0.5, 0.75, 1.0}));
  EXPECT_EQ(Axis(Spec("x", ParamSpec::Kind::kFloat, 2, 4, false, 3)),
            (std::vector<ParamValue>{2.0, 3.0, 4.0}));
}

TEST(GridSamplerTest, LogFloatAxisIsLogSpacedWithExactEndpoints) {
  const std::vector<ParamValue> axis = Axis(Spec("lr", ParamSpec::Kind::kFloat, 1e-4, 1, true));
  ASSERT_EQ(axis.size(), 5u);
  EXPECT_EQ(std::get<double>(axis[0]), 1e-4);
  EXPECT_EQ(std::get<double>(axis[4]), 1.0);
  for (int k = 0; k < 5; ++k) {
    EXPECT_NEAR(std::log10(std::get<double>(axis[k])), k - 4.0, 1e-12);
  }
}

TEST(GridSamplerTest, IntAxisListsEveryValueInRange) {
  EXPECT_EQ(
      Axis(Spec("n", ParamSpec::Kind::kInt, -2, 2)),
      (std::vector<ParamValue>{int64_t{-2}, int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{2}}));
}

TEST(GridSamplerTest, IntAxisWithGridPointsIsSpacedRoundedAndDeduplicated) {
  EXPECT_EQ(Axis(Spec("n", ParamSpec::Kind::kInt, 0, 10, false, 3)),
            (std::vector<ParamValue>{int64_t{0}, int64_t{5}, int64_t{10}}));
  EXPECT_EQ(Axis(Spec("n", ParamSpec::Kind::kInt, 0, 2, false, 5)),
            (std::vector<ParamValue>{int64_t{0}, int64_t{1}, int64_t{2}}));
  EXPECT_EQ(
      Axis(Spec("batch", ParamSpec::Kind::kInt, 16, 256, true, 5)),
      (std::vector<ParamValue>{int64_t{16}, int64_t{32}, int64_t{64}, int64_t{128}, int64_t{256}}));
}

TEST(GridSamplerTest, CategoricalAxisListsEveryValueInOrder) {
  EXPECT_EQ(
      Axis(Categorical("opt", {"sgd", "adam", "lion"})),
      (std::vector<ParamValue>{std::string("sgd"), std::string("adam"), std::string("lion")}));
}

TEST(GridSamplerTest, OmitsInactiveConditionalParametersAndSkipsDuplicates) {
  SearchSpace space;
  space.params.push_back(Categorical("opt", {"adam", "sgd"}));
  space.params.push_back(Spec("momentum", ParamSpec::Kind::kFloat, 0, 1, false, 3));
  space.params.back().when = {{"opt", "sgd"}};
  auto sampler = NewGridSampler(space);
  const std::vector<Params> expected = {
      {{"opt", std::string("adam")}},
      {{"opt", std::string("sgd")}, {"momentum", 0.0}},
      {{"opt", std::string("sgd")}, {"momentum", 0.5}},
      {{"opt", std::string("sgd")}, {"momentum", 1.0}},
  };
  EXPECT_EQ(Enumerate(*sampler), expected);
}

TEST(GridSamplerTest, AnswersDoNotDependOnRequestOrder) {
  SearchSpace space;
  space.params.push_back(Categorical("opt", {"adam", "sgd"}));
  space.params.push_back(Spec("momentum", ParamSpec::Kind::kFloat, 0, 1, false, 3));
  space.params.back().when = {{"opt", "sgd"}};
  space.params.push_back(Spec("layers", ParamSpec::Kind::kInt, 1, 2));
  auto sequential = NewGridSampler(space);
  const std::vector<Params> expected = Enumerate(*sequential);
  ASSERT_EQ(expected.size(), 8u);
  auto shuffled = NewGridSampler(space);
  for (int i : {5, 2, 7, 0, 5}) {
    absl::StatusOr<Params> p = shuffled->Ask(At(i));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(*p, expected[i]) << i;
  }
}

TEST(GridSamplerTest, EmptyCategoricalMakesAnEmptyGrid) {
  SearchSpace space;
  space.params.push_back(Categorical("opt", {}));
  space.params.push_back(Spec("n", ParamSpec::Kind::kInt, 0, 3));
  auto sampler = NewGridSampler(space);
  EXPECT_EQ(sampler->Ask(At(0)).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(GridSamplerTest, RejectsNegativeTrialNumber) {
  SearchSpace space;
  space.params.push_back(Spec("n", ParamSpec::Kind::kInt, 0, 3));
  auto sampler = NewGridSampler(space);
  EXPECT_EQ(sampler->Ask(At(-1)).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant
