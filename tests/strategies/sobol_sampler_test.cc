#include <boost/random/sobol.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "strategies/internal/sobol_sequence.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"
#include "tests/strategies/sampler_test_util.h"

namespace sextant {
namespace {

using testing::At;

// dims float parameters on [0, 1], so a parameter's value is its unit-cube coordinate.
SearchSpace UnitCube(int dims) {
  SearchSpace space;
  for (int d = 0; d < dims; ++d) {
    ParamSpec spec;
    spec.name = absl::StrCat("x", d);
    space.params.push_back(spec);
  }
  return space;
}

// Points [0, n) as rows of unit-cube coordinates.
std::vector<std::vector<double>> Points(Sampler& sampler, int dims, int n) {
  std::vector<std::vector<double>> out;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Params> p = sampler.Ask(At(i));
    EXPECT_TRUE(p.ok()) << p.status();
    std::vector<double> row;
    for (int d = 0; d < dims && p.ok(); ++d) {
      row.push_back(std::get<double>(p->at(absl::StrCat("x", d))));
    }
    out.push_back(row);
  }
  return out;
}

TEST(SobolSamplerTest, FirstPowerOfTwoPointsAreStratifiedInEveryDimension) {
  for (int dims : {1, 2, 5, 13, 40}) {
    for (uint64_t seed : {0u, 1u, 12345u}) {
      auto sampler = NewSobolSampler(UnitCube(dims), seed);
      const auto points = Points(*sampler, dims, 256);
      for (int m = 4; m <= 8; ++m) {
        const int n = 1 << m;
        for (int d = 0; d < dims; ++d) {
          std::vector<int> hits(n, 0);
          for (int i = 0; i < n; ++i) ++hits[static_cast<int>(points[i][d] * n)];
          for (int cell = 0; cell < n; ++cell) {
            ASSERT_EQ(hits[cell], 1) << "dims=" << dims << " seed=" << seed << " m=" << m
                                     << " d=" << d << " cell=" << cell;
          }
        }
      }
    }
  }
}

TEST(SobolSamplerTest, FirstTwoDimensionsStayAZeroNetAfterScrambling) {
  // Sobol's first two dimensions form a (0,m,2)-net: every elementary box of area 2^-m holds
  // exactly one of the first 2^m points. Owen scrambling preserves that.
  auto sampler = NewSobolSampler(UnitCube(2), 99);
  constexpr int kM = 8;
  const auto points = Points(*sampler, 2, 1 << kM);
  for (int a = 0; a <= kM; ++a) {
    const int nx = 1 << a;
    const int ny = 1 << (kM - a);
    std::map<std::pair<int, int>, int> hits;
    for (const auto& p : points) {
      ++hits[{static_cast<int>(p[0] * nx), static_cast<int>(p[1] * ny)}];
    }
    EXPECT_EQ(hits.size(), static_cast<size_t>(1 << kM)) << "a=" << a;
  }
}

TEST(SobolSamplerTest, SameSeedGivesSamePoints) {
  auto a = NewSobolSampler(UnitCube(4), 7);
  auto b = NewSobolSampler(UnitCube(4), 7);
  EXPECT_EQ(Points(*a, 4, 100), Points(*b, 4, 100));
}

TEST(SobolSamplerTest, DifferentSeedsGiveDifferentPoints) {
  auto a = NewSobolSampler(UnitCube(4), 7);
  auto b = NewSobolSampler(UnitCube(4), 8);
  const auto pa = Points(*a, 4, 64);
  const auto pb = Points(*b, 4, 64);
  int equal = 0;
  for (int i = 0; i < 64; ++i) {
    for (int d = 0; d < 4; ++d) equal += pa[i][d] == pb[i][d] ? 1 : 0;
  }
  EXPECT_EQ(equal, 0);
}

TEST(SobolSamplerTest, ScrambledPointsDifferFromUnscrambled) {
  constexpr int kDims = 3;
  auto sampler = NewSobolSampler(UnitCube(kDims), 2024);
  const auto scrambled = Points(*sampler, kDims, 64);
  absl::StatusOr<internal::SobolSequence> raw = internal::SobolSequence::Create(kDims);
  ASSERT_TRUE(raw.ok());
  int equal = 0;
  for (int i = 0; i < 64; ++i) {
    absl::StatusOr<std::vector<uint32_t>> point = raw->Point(i);
    ASSERT_TRUE(point.ok());
    for (int d = 0; d < kDims; ++d) {
      equal += scrambled[i][d] == (*point)[d] * 0x1.0p-32 ? 1 : 0;
    }
  }
  EXPECT_EQ(equal, 0);
  // In particular the origin is moved off the corner.
  EXPECT_NE(scrambled[0], std::vector<double>(kDims, 0.0));
}

TEST(SobolSamplerTest, TrialGetsPointOfItsNumberWhateverTheOrder) {
  auto sequential = NewSobolSampler(UnitCube(3), 5);
  const auto expected = Points(*sequential, 3, 40);
  auto shuffled = NewSobolSampler(UnitCube(3), 5);
  for (int i : {31, 2, 39, 0, 31}) {
    absl::StatusOr<Params> p = shuffled->Ask(At(i));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(std::get<double>(p->at("x1")), expected[i][1]) << i;
  }
}

TEST(SobolSamplerTest, IntAndCategoricalParametersAreStratifiedToo) {
  SearchSpace space;
  ParamSpec n;
  n.name = "n";
  n.kind = ParamSpec::Kind::kInt;
  n.min = 10;
  n.max = 17;
  space.params.push_back(n);
  ParamSpec opt;
  opt.name = "opt";
  opt.kind = ParamSpec::Kind::kCategorical;
  opt.values = {"a", "b", "c", "d"};
  space.params.push_back(opt);
  auto sampler = NewSobolSampler(space, 3);
  std::set<int64_t> ints;
  std::map<std::string, int> cats;
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<Params> p = sampler->Ask(At(i));
    ASSERT_TRUE(p.ok());
    ints.insert(std::get<int64_t>(p->at("n")));
    ++cats[std::get<std::string>(p->at("opt"))];
  }
  EXPECT_EQ(ints, (std::set<int64_t>{10, 11, 12, 13, 14, 15, 16, 17}));
  EXPECT_EQ(cats, (std::map<std::string, int>{{"a", 2}, {"b", 2}, {"c", 2}, {"d", 2}}));
}

TEST(SobolSamplerTest, OmitsConditionalParameterWhenInactive) {
  SearchSpace space;
  ParamSpec opt;
  opt.name = "opt";
  opt.kind = ParamSpec::Kind::kCategorical;
  opt.values = {"sgd", "adam"};
  space.params.push_back(opt);
  ParamSpec momentum;
  momentum.name = "momentum";
  momentum.when = {{"opt", "sgd"}};
  space.params.push_back(momentum);
  auto sampler = NewSobolSampler(space, 11);
  int sgd = 0;
  for (int i = 0; i < 32; ++i) {
    absl::StatusOr<Params> p = sampler->Ask(At(i));
    ASSERT_TRUE(p.ok());
    const bool is_sgd = std::get<std::string>(p->at("opt")) == "sgd";
    EXPECT_EQ(p->contains("momentum"), is_sgd);
    sgd += is_sgd ? 1 : 0;
  }
  EXPECT_EQ(sgd, 16);  // stratified: exactly half
}

TEST(SobolSamplerTest, RejectsNegativeTrialNumberAndRunsOutAfterTwoToThe32) {
  auto sampler = NewSobolSampler(UnitCube(2), 1);
  EXPECT_EQ(sampler->Ask(At(-1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(sampler->Ask(At((int64_t{1} << 32) - 1)).ok());
  EXPECT_EQ(sampler->Ask(At(int64_t{1} << 32)).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(SobolSamplerTest, TooManyDimensionsIsInvalidArgument) {
  auto sampler =
      NewSobolSampler(UnitCube(static_cast<int>(internal::SobolSequence::kMaxDimension) + 1), 1);
  EXPECT_EQ(sampler->Ask(At(0)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SobolSamplerTest, EmptySpaceGivesEmptyParams) {
  auto sampler = NewSobolSampler(SearchSpace(), 1);
  absl::StatusOr<Params> p = sampler->Ask(At(3));
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->empty());
}

// Documents the finding that motivates SobolSequence's index shift: Boost's engine begins at
// the second Sobol point (1/2 in every dimension), not at the origin.
TEST(SobolSequenceTest, BoostEngineSkipsTheOriginAndSequenceRestoresIt) {
  boost::random::sobol_engine<uint32_t, 32> boost_engine(3);
  std::vector<uint32_t> boost_first(3);
  for (uint32_t& x : boost_first) x = boost_engine();
  EXPECT_EQ(boost_first, std::vector<uint32_t>(3, 0x80000000u));

  absl::StatusOr<internal::SobolSequence> sequence = internal::SobolSequence::Create(3);
  ASSERT_TRUE(sequence.ok());
  EXPECT_EQ(*sequence->Point(0), std::vector<uint32_t>(3, 0u));
  EXPECT_EQ(*sequence->Point(1), boost_first);
}

TEST(SobolSequenceTest, FirstDimensionIsVanDerCorputInGrayCodeOrder) {
  absl::StatusOr<internal::SobolSequence> sequence = internal::SobolSequence::Create(1);
  ASSERT_TRUE(sequence.ok());
  const std::vector<double> expected = {0, 0.5, 0.75, 0.25, 0.375, 0.875, 0.625, 0.125};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ((*sequence->Point(i))[0] * 0x1.0p-32, expected[i]) << i;
  }
}

TEST(SobolSequenceTest, UnscrambledPrefixIsStratified) {
  absl::StatusOr<internal::SobolSequence> sequence = internal::SobolSequence::Create(8);
  ASSERT_TRUE(sequence.ok());
  constexpr int kM = 6;
  for (int d = 0; d < 8; ++d) {
    std::set<uint32_t> cells;
    for (int i = 0; i < (1 << kM); ++i) cells.insert((*sequence->Point(i))[d] >> (32 - kM));
    EXPECT_EQ(cells.size(), 1u << kM) << d;
  }
}

TEST(SobolSequenceTest, CreateRejectsZeroDimensions) {
  EXPECT_EQ(internal::SobolSequence::Create(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(OwenScrambleTest, ReverseBitsReversesAndIsAnInvolution) {
  EXPECT_EQ(internal::ReverseBits(1u), 0x80000000u);
  EXPECT_EQ(internal::ReverseBits(0x0000000fu), 0xf0000000u);
  EXPECT_EQ(internal::ReverseBits(0x12345678u), 0x1e6a2c48u);
  std::mt19937 rng(1);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t x = rng();
    EXPECT_EQ(internal::ReverseBits(internal::ReverseBits(x)), x);
  }
}

TEST(OwenScrambleTest, KeepsSharedLeadingDigitsAndPermutesPrefixes) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    const uint64_t key = rng();
    // Prefix-preserving: values agreeing on their top k bits still agree after scrambling.
    for (int i = 0; i < 200; ++i) {
      const uint32_t x = static_cast<uint32_t>(rng());
      const int k = static_cast<int>(rng() % 32);
      const uint32_t low_mask = k == 0 ? 0xffffffffu : (1u << (32 - k)) - 1;
      const uint32_t y = (x & ~low_mask) | (static_cast<uint32_t>(rng()) & low_mask);
      EXPECT_EQ(internal::OwenScramble(x, key) & ~low_mask,
                internal::OwenScramble(y, key) & ~low_mask);
    }
    // Bijective on 12-bit prefixes: the 4096 cells of width 2^-12 map onto all 4096 cells.
    std::set<uint32_t> cells;
    for (uint32_t c = 0; c < 4096; ++c) cells.insert(internal::OwenScramble(c << 20, key) >> 20);
    EXPECT_EQ(cells.size(), 4096u);
  }
}

TEST(OwenScrambleTest, DifferentKeysGiveDifferentScrambles) {
  std::set<uint32_t> images;
  for (uint64_t key = 0; key < 64; ++key) images.insert(internal::OwenScramble(0x9e3779b9u, key));
  EXPECT_GT(images.size(), 60u);
}

}  // namespace
}  // namespace sextant
