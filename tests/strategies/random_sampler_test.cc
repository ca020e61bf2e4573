#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
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

ParamSpec Spec(std::string name, ParamSpec::Kind kind, double min, double max, bool log = false) {
  ParamSpec spec;
  spec.name = std::move(name);
  spec.kind = kind;
  spec.min = min;
  spec.max = max;
  spec.log = log;
  return spec;
}

// One parameter of every kind, plus a conditional one.
SearchSpace MixedSpace() {
  SearchSpace space;
  space.params.push_back(Spec("lr", ParamSpec::Kind::kFloat, 1e-4, 1, /*log=*/true));
  space.params.push_back(Spec("dropout", ParamSpec::Kind::kFloat, 0, 0.5));
  space.params.push_back(Spec("layers", ParamSpec::Kind::kInt, 3, 9));
  space.params.push_back(Spec("batch", ParamSpec::Kind::kInt, 16, 256, /*log=*/true));
  ParamSpec opt = Spec("opt", ParamSpec::Kind::kCategorical, 0, 0);
  opt.values = {"sgd", "adam", "lion"};
  space.params.push_back(opt);
  ParamSpec momentum = Spec("momentum", ParamSpec::Kind::kFloat, 0.5, 0.99);
  momentum.when = {{"opt", "sgd"}};
  space.params.push_back(momentum);
  return space;
}

std::vector<Params> Draw(Sampler& sampler, int n) {
  std::vector<Params> out;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Params> p = sampler.Ask(At(i));
    EXPECT_TRUE(p.ok()) << p.status();
    out.push_back(p.ok() ? *p : Params());
  }
  return out;
}

constexpr int kDraws = 7000;

TEST(RandomSamplerTest, RespectsBoundsOfEveryKind) {
  auto sampler = NewRandomSampler(MixedSpace(), 1);
  for (const Params& p : Draw(*sampler, kDraws)) {
    const double lr = std::get<double>(p.at("lr"));
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1.0);
    const double dropout = std::get<double>(p.at("dropout"));
    EXPECT_GE(dropout, 0.0);
    EXPECT_LE(dropout, 0.5);
    const int64_t layers = std::get<int64_t>(p.at("layers"));
    EXPECT_GE(layers, 3);
    EXPECT_LE(layers, 9);
    const int64_t batch = std::get<int64_t>(p.at("batch"));
    EXPECT_GE(batch, 16);
    EXPECT_LE(batch, 256);
    const std::string& opt = std::get<std::string>(p.at("opt"));
    EXPECT_TRUE(opt == "sgd" || opt == "adam" || opt == "lion") << opt;
    if (p.contains("momentum")) {
      EXPECT_GE(std::get<double>(p.at("momentum")), 0.5);
      EXPECT_LE(std::get<double>(p.at("momentum")), 0.99);
    }
  }
}

TEST(RandomSamplerTest, LogFloatMedianIsNearGeometricMean) {
  auto sampler = NewRandomSampler(MixedSpace(), 2);
  std::vector<double> lrs;
  for (const Params& p : Draw(*sampler, kDraws)) lrs.push_back(std::get<double>(p.at("lr")));
  std::nth_element(lrs.begin(), lrs.begin() + kDraws / 2, lrs.end());
  // Geometric mean of [1e-4, 1] is 1e-2; a uniform draw would put the median near 0.5.
  EXPECT_NEAR(std::log10(lrs[kDraws / 2]), -2.0, 0.1);
}

TEST(RandomSamplerTest, LinearFloatMeanIsNearMidpoint) {
  auto sampler = NewRandomSampler(MixedSpace(), 3);
  double sum = 0;
  for (const Params& p : Draw(*sampler, kDraws)) sum += std::get<double>(p.at("dropout"));
  EXPECT_NEAR(sum / kDraws, 0.25, 0.01);
}

TEST(RandomSamplerTest, IntValuesHitEveryIntegerEqually) {
  auto sampler = NewRandomSampler(MixedSpace(), 4);
  std::map<int64_t, int> counts;
  for (const Params& p : Draw(*sampler, kDraws)) ++counts[std::get<int64_t>(p.at("layers"))];
  ASSERT_EQ(counts.size(), 7u);
  for (const auto& [k, n] : counts) EXPECT_NEAR(n, kDraws / 7, 120) << k;  // ~4.5 sigma
}

TEST(RandomSamplerTest, LogIntValuesFavourSmallIntegers) {
  auto sampler = NewRandomSampler(MixedSpace(), 5);
  int below_geometric_mean = 0;  // sqrt(16 * 256) = 64
  for (const Params& p : Draw(*sampler, kDraws)) {
    below_geometric_mean += std::get<int64_t>(p.at("batch")) < 64 ? 1 : 0;
  }
  EXPECT_NEAR(below_geometric_mean, kDraws / 2, 200);
}

TEST(RandomSamplerTest, CategoricalValuesAllHit) {
  auto sampler = NewRandomSampler(MixedSpace(), 6);
  std::map<std::string, int> counts;
  for (const Params& p : Draw(*sampler, kDraws)) ++counts[std::get<std::string>(p.at("opt"))];
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [v, n] : counts) EXPECT_NEAR(n, kDraws / 3, 180) << v;
}

TEST(RandomSamplerTest, OmitsConditionalParameterWhenInactive) {
  auto sampler = NewRandomSampler(MixedSpace(), 7);
  int with = 0;
  for (const Params& p : Draw(*sampler, 300)) {
    const bool sgd = std::get<std::string>(p.at("opt")) == "sgd";
    EXPECT_EQ(p.contains("momentum"), sgd);
    with += sgd ? 1 : 0;
  }
  EXPECT_GT(with, 0);
}

TEST(RandomSamplerTest, SameSeedGivesSameDraws) {
  auto a = NewRandomSampler(MixedSpace(), 42);
  auto b = NewRandomSampler(MixedSpace(), 42);
  EXPECT_EQ(Draw(*a, 200), Draw(*b, 200));
}

TEST(RandomSamplerTest, DifferentSeedsGiveDifferentDraws) {
  auto a = NewRandomSampler(MixedSpace(), 42);
  auto b = NewRandomSampler(MixedSpace(), 43);
  const std::vector<Params> da = Draw(*a, 200);
  const std::vector<Params> db = Draw(*b, 200);
  int same_lr = 0;
  for (int i = 0; i < 200; ++i) same_lr += da[i].at("lr") == db[i].at("lr") ? 1 : 0;
  EXPECT_EQ(same_lr, 0);
}

TEST(RandomSamplerTest, DrawDependsOnlyOnSeedAndTrialNumber) {
  auto sequential = NewRandomSampler(MixedSpace(), 9);
  const std::vector<Params> expected = Draw(*sequential, 10);
  auto fresh = NewRandomSampler(MixedSpace(), 9);
  const std::vector<Observation> history(7);
  absl::StatusOr<Params> seventh = fresh->Ask(At(7, history));
  ASSERT_TRUE(seventh.ok());
  EXPECT_EQ(*seventh, expected[7]);
  absl::StatusOr<Params> third = fresh->Ask(At(3));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(*third, expected[3]);
  EXPECT_NE(expected[3], expected[7]);
}

TEST(RandomSamplerTest, RejectsNegativeTrialNumber) {
  auto sampler = NewRandomSampler(MixedSpace(), 1);
  EXPECT_EQ(sampler->Ask(At(-1)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RandomSamplerTest, EmptySpaceGivesEmptyParams) {
  auto sampler = NewRandomSampler(SearchSpace(), 1);
  absl::StatusOr<Params> p = sampler->Ask(At(0));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty());
}

}  // namespace
}  // namespace sextant
