#include "federation/weighted_average.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

using Matrix = std::vector<std::vector<float>>;

Matrix RandomUpdates(size_t n, size_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Matrix u(n, std::vector<float>(d));
  for (auto& row : u) {
    for (float& x : row) x = normal(rng) * (1.0f + static_cast<float>(rng() % 1000));
  }
  return u;
}

std::vector<double> RandomWeights(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> w(n);
  for (double& x : w) x = 1 + rng() % 5000;  // example counts
  return w;
}

std::vector<absl::Span<const float>> Spans(const Matrix& m) { return {m.begin(), m.end()}; }

// The documented bound: (B 2^-24 + (2n + 4B + 2) 2^-53) sum(w|u|) / W against the exact mean.
// An update dropped part-way adds one more rounding of a value that still included it:
// 2^-24 (sum(w|u|) + dropped_w |dropped|) / W.
void ExpectWithinBound(const WeightedAverage& avg, const Matrix& u, const std::vector<double>& w,
                       int folds, const std::vector<float>* dropped = nullptr,
                       double dropped_w = 0) {
  const size_t n = u.size();
  long double total = 0;
  for (double x : w) total += x;
  const double rel =
      folds * std::ldexp(1.0, -24) + (2.0 * n + 4.0 * folds + 2) * std::ldexp(1.0, -53);
  for (size_t j = 0; j < avg.size(); ++j) {
    long double exact = 0, magnitude = 0;
    for (size_t i = 0; i < n; ++i) {
      exact += static_cast<long double>(w[i]) * u[i][j];
      magnitude += static_cast<long double>(w[i]) * std::fabs(u[i][j]);
    }
    long double bound = rel * magnitude / total;
    if (dropped != nullptr) {
      bound += std::ldexp(1.0, -24) * (magnitude + dropped_w * std::fabs((*dropped)[j])) / total;
    }
    const long double err = std::fabs(static_cast<long double>(avg.mean()[j]) - exact / total);
    ASSERT_LE(err, bound) << "coordinate " << j;
  }
}

TEST(WeightedAverageTest, EqualsExactWeightedMean) {
  WeightedAverage avg(3);
  std::vector<float> a = {1, 2, 3}, b = {4, 5, 6};
  ASSERT_TRUE(avg.Add(a, 1.0).ok());
  ASSERT_TRUE(avg.Add(b, 3.0).ok());
  std::vector<float> out(3);
  ASSERT_TRUE(avg.Mean(absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, (std::vector<float>{13 / 4.0f, 17 / 4.0f, 21 / 4.0f}));
  EXPECT_EQ(avg.count(), 2);
  EXPECT_EQ(avg.total_weight(), 4.0);
}

// An update folded range by range (as from a file) leaves the mean bit for bit where AddDamped
// leaves it, whatever the ranges' boundaries, including the first fold of a reset mean.
TEST(WeightedAverageTest, RangesFoldBitForBitLikeTheWholeUpdate) {
  const size_t d = 3 * WeightedAverage::kBlock + 123;
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0, 1);
  std::vector<std::vector<float>> u(3, std::vector<float>(d));
  for (auto& v : u) std::generate(v.begin(), v.end(), [&] { return n(rng); });
  const double w[] = {2, 5, 1}, f[] = {1, 0.5, 0.25};
  WeightedAverage whole(d), ranges(d);
  for (int round = 0; round < 2; ++round) {  // the second after a Reset (stale mean)
    whole.Reset();
    ranges.Reset();
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(whole.AddDamped(u[i], w[i], f[i]).ok());
      for (size_t at = 0, len = 1000 + 7 * i; at < d; at += len) {
        const size_t k = std::min(len, d - at);
        ASSERT_TRUE(
            ranges.AddDampedRange(at, absl::MakeConstSpan(u[i].data() + at, k), w[i], f[i]).ok());
      }
      ranges.EndRanges(w[i]);
    }
    EXPECT_EQ(ranges.total_weight(), whole.total_weight());
    EXPECT_EQ(ranges.count(), whole.count());
    ASSERT_TRUE(std::equal(whole.mean().begin(), whole.mean().end(), ranges.mean().begin()));
  }
  std::vector<float> bad = {1, std::nanf(""), 3};
  EXPECT_FALSE(ranges.AddDampedRange(0, bad, 1, 1).ok());
  EXPECT_FALSE(ranges.AddDampedRange(d - 1, absl::MakeConstSpan(bad.data(), 2), 1, 1).ok());
}

TEST(WeightedAverageTest, BatchOfRandomUpdatesIsWithinOneFloatRoundingOfLongDoubleMean) {
  const size_t d = 3 * WeightedAverage::kBlock + 17;  // several blocks and a ragged tail
  // Every width of a fold's last group (1 to 12), and groups of eight before it.
  for (size_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 21, 64}) {
    const Matrix u = RandomUpdates(n, d, 100 + n);
    const std::vector<double> w = RandomWeights(n, 200 + n);
    WeightedAverage avg(d);
    for (const absl::Status& s : avg.AddBatch(Spans(u), w)) ASSERT_TRUE(s.ok()) << s;
    ExpectWithinBound(avg, u, w, /*folds=*/1);
  }
}

TEST(WeightedAverageTest, OneAtATimeStaysWithinTheBoundForManyFolds) {
  const size_t n = 50, d = 1000;
  const Matrix u = RandomUpdates(n, d, 7);
  const std::vector<double> w = RandomWeights(n, 8);
  WeightedAverage avg(d);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(avg.Add(u[i], w[i]).ok());
  EXPECT_EQ(avg.count(), 50);
  ExpectWithinBound(avg, u, w, /*folds=*/static_cast<int>(n));
}

TEST(WeightedAverageTest, RegionalMeansCombineExactlyLikeTheFlatMean) {
  // Dyadic values and power-of-two totals keep every partial mean exact, so grouping must not
  // change a single bit.
  const Matrix a = {{1, -2, 0.5f}, {3, 6, -0.25f}}, b = {{8, 1, 2}, {-4, 0, 1}, {2, 2, 2}};
  const std::vector<double> wa = {1, 3}, wb = {1, 1, 2};
  WeightedAverage region_a(3), region_b(3), global(3), flat(3);
  for (size_t i = 0; i < 2; ++i) ASSERT_TRUE(region_a.Add(a[i], wa[i]).ok());
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(region_b.Add(b[i], wb[i]).ok());
  ASSERT_TRUE(global.Add(region_a.mean(), region_a.total_weight()).ok());
  ASSERT_TRUE(global.Add(region_b.mean(), region_b.total_weight()).ok());
  Matrix all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::vector<double> w = wa;
  w.insert(w.end(), wb.begin(), wb.end());
  for (const absl::Status& s : flat.AddBatch(Spans(all), w)) ASSERT_TRUE(s.ok());
  EXPECT_EQ(std::vector<float>(global.mean().begin(), global.mean().end()),
            std::vector<float>(flat.mean().begin(), flat.mean().end()));
  EXPECT_EQ(global.total_weight(), 8.0);
  // Exact reference for the first coordinate: (1*1 + 3*3 + 1*8 - 1*4 + 2*2) / 8.
  EXPECT_EQ(flat.mean()[0], 2.25f);
}

TEST(WeightedAverageTest, HierarchyOnRandomDataStaysWithinTheFlatBound) {
  const size_t d = 5000;
  const Matrix u = RandomUpdates(6, d, 3);
  const std::vector<double> w = RandomWeights(6, 4);
  WeightedAverage r1(d), r2(d), global(d);
  for (const absl::Status& s : r1.AddBatch(Spans({u[0], u[1], u[2]}), {w[0], w[1], w[2]})) {
    ASSERT_TRUE(s.ok());
  }
  for (const absl::Status& s : r2.AddBatch(Spans({u[3], u[4], u[5]}), {w[3], w[4], w[5]})) {
    ASSERT_TRUE(s.ok());
  }
  ASSERT_TRUE(global.Add(r1.mean(), r1.total_weight()).ok());
  ASSERT_TRUE(global.Add(r2.mean(), r2.total_weight()).ok());
  // Each client value went through its region's fold and two global folds.
  ExpectWithinBound(global, u, w, /*folds=*/3);
}

TEST(WeightedAverageTest, WeightedSumFoldsLikeItsUpdates) {
  const std::vector<float> sum = {1 * 2 + 3 * 6, 1 * 4 + 3 * 8};  // weights 1 and 3
  WeightedAverage avg(2);
  ASSERT_TRUE(avg.AddWeightedSum(sum, 4.0, 2).ok());
  EXPECT_EQ(avg.mean()[0], 5.0f);
  EXPECT_EQ(avg.mean()[1], 7.0f);
  EXPECT_EQ(avg.count(), 2);
  const std::vector<float> bad = {1, std::numeric_limits<float>::infinity()};
  EXPECT_EQ(avg.AddWeightedSum(bad, 1.0, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(avg.AddWeightedSum(sum, 1.0, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(avg.count(), 2);
}

TEST(WeightedAverageTest, RejectsBadUpdatesWithoutChangingTheMean) {
  WeightedAverage avg(2);
  std::vector<float> good = {2, 2};
  ASSERT_TRUE(avg.Add(good, 1.0).ok());
  std::vector<float> nan = {std::numeric_limits<float>::quiet_NaN(), 1};
  std::vector<float> wrong = {1, 2, 3};
  EXPECT_EQ(avg.Add(nan, 1.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(avg.Add(wrong, 1.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(avg.Add(good, 0.0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(avg.Add(good, std::numeric_limits<double>::infinity()).code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> out(2);
  ASSERT_TRUE(avg.Mean(absl::MakeSpan(out)).ok());
  EXPECT_EQ(out, good);
  EXPECT_EQ(avg.count(), 1);
  EXPECT_EQ(avg.total_weight(), 1.0);
}

TEST(WeightedAverageTest, BatchLeavesOutAnUpdateWithInfDeepInsideAndKeepsTheRest) {
  const size_t d = 3 * WeightedAverage::kBlock;
  Matrix u = RandomUpdates(5, d, 11);
  const std::vector<double> w = RandomWeights(5, 12);
  u[2][2 * WeightedAverage::kBlock + 5] = std::numeric_limits<float>::infinity();
  WeightedAverage avg(d);
  const std::vector<absl::Status> st = avg.AddBatch(Spans(u), w);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(st[i].ok(), i != 2) << i;
  EXPECT_NE(st[2].message().find(std::to_string(2 * WeightedAverage::kBlock + 5)),
            std::string::npos);
  EXPECT_EQ(avg.count(), 4);
  const Matrix kept = {u[0], u[1], u[3], u[4]};
  ExpectWithinBound(avg, kept, {w[0], w[1], w[3], w[4]}, /*folds=*/1, &u[2], w[2]);
}

TEST(WeightedAverageTest, AnInfMidBlockOnTopOfAnEarlierFoldIsTakenBackOutOfTheStoredBlocks) {
  // A bad value found in the second block leaves the first block stored; it must be corrected,
  // and the earlier fold's mean must still be the input of the blocks after it. Twenty updates:
  // a group of eight, then a last group of twelve; the bad one is in either group.
  const size_t d = 3 * WeightedAverage::kBlock + 17;
  const size_t at = WeightedAverage::kBlock + 3 * 1024 + 7;
  for (size_t bad : {3, 15}) {
    const Matrix first = RandomUpdates(5, d, 31);
    Matrix second = RandomUpdates(20, d, 32);
    const std::vector<double> w1 = RandomWeights(5, 33), w2 = RandomWeights(20, 34);
    second[bad][at] = -std::numeric_limits<float>::infinity();
    WeightedAverage avg(d);
    for (const absl::Status& s : avg.AddBatch(Spans(first), w1)) ASSERT_TRUE(s.ok()) << s;
    const std::vector<absl::Status> st = avg.AddBatch(Spans(second), w2);
    for (size_t i = 0; i < st.size(); ++i) EXPECT_EQ(st[i].ok(), i != bad) << i;
    EXPECT_NE(st[bad].message().find(std::to_string(at)), std::string::npos) << st[bad];
    EXPECT_EQ(avg.count(), 24);
    Matrix kept = first;
    std::vector<double> w = w1;
    for (size_t i = 0; i < second.size(); ++i) {
      if (i == bad) continue;
      kept.push_back(second[i]);
      w.push_back(w2[i]);
    }
    // The dropped update's infinity is at one coordinate only; elsewhere it is a finite value.
    std::vector<float> dropped = second[bad];
    dropped[at] = 0;
    ExpectWithinBound(avg, kept, w, /*folds=*/2, &dropped, w2[bad]);
  }
}

TEST(WeightedAverageTest, BatchWhoseOnlyUpdateIsBadLeavesNothing) {
  const size_t d = 2 * WeightedAverage::kBlock;
  std::vector<float> u(d, 1.0f);
  u[d - 1] = std::numeric_limits<float>::quiet_NaN();
  WeightedAverage avg(d);
  EXPECT_FALSE(avg.Add(u, 3.0).ok());
  EXPECT_EQ(avg.count(), 0);
  for (float x : avg.mean()) ASSERT_EQ(x, 0.0f);
  std::vector<float> out(d);
  EXPECT_EQ(avg.Mean(absl::MakeSpan(out)).code(), absl::StatusCode::kFailedPrecondition);
}

// Long enough for three threads' ranges, with a short last block.
constexpr size_t kThreeParts =
    3 * WeightedAverage::kMinBlocksPerPart * WeightedAverage::kBlock + 17;

TEST(WeightedAverageTest, ThreadsGiveTheSameMeanBitForBitAsOne) {
  const Matrix u = RandomUpdates(11, kThreeParts, 21);
  const std::vector<double> w = RandomWeights(11, 22);
  WeightedAverage one(kThreeParts), three(kThreeParts, 3);
  // A batch, then single updates on top of it (the stream path).
  const Matrix first(u.begin(), u.begin() + 9);
  for (const absl::Status& s : one.AddBatch(Spans(first), absl::MakeConstSpan(w.data(), 9))) {
    ASSERT_TRUE(s.ok());
  }
  for (const absl::Status& s : three.AddBatch(Spans(first), absl::MakeConstSpan(w.data(), 9))) {
    ASSERT_TRUE(s.ok());
  }
  for (size_t i = 9; i < 11; ++i) {
    ASSERT_TRUE(one.Add(u[i], w[i]).ok());
    ASSERT_TRUE(three.Add(u[i], w[i]).ok());
  }
  EXPECT_EQ(three.count(), 11);
  EXPECT_EQ(three.total_weight(), one.total_weight());
  for (size_t j = 0; j < kThreeParts; ++j) ASSERT_EQ(three.mean()[j], one.mean()[j]) << j;
  ExpectWithinBound(three, u, w, /*folds=*/3);
}

// A mean of kStreamFrom coordinates or more is stored with streaming stores: the same values,
// bit for bit, as the cached stores of a shorter mean over the same prefix.
TEST(WeightedAverageTest, StreamingStoresGiveTheSameMeanAsCachedStores) {
  const size_t d = WeightedAverage::kStreamFrom + 3;
  const Matrix u = RandomUpdates(5, d, 51);
  const std::vector<double> w = RandomWeights(5, 52);
  Matrix prefix;
  for (const auto& v : u) prefix.emplace_back(v.begin(), v.begin() + (d - 4));
  WeightedAverage streamed(d, 2), cached(d - 4);
  for (const absl::Status& s : streamed.AddBatch(Spans(u), w)) ASSERT_TRUE(s.ok());
  for (const absl::Status& s : cached.AddBatch(Spans(prefix), w)) ASSERT_TRUE(s.ok());
  ASSERT_TRUE(streamed.Add(u[0], 3.0).ok());  // a second fold reads the streamed mean back
  ASSERT_TRUE(cached.Add(prefix[0], 3.0).ok());
  for (size_t j = 0; j < d - 4; ++j) ASSERT_EQ(streamed.mean()[j], cached.mean()[j]) << j;
  Matrix all = prefix;
  all.push_back(prefix[0]);
  std::vector<double> all_w = w;
  all_w.push_back(3.0);
  ExpectWithinBound(cached, all, all_w, /*folds=*/2);
}

TEST(WeightedAverageTest, AnUpdateBadInOneThreadsRangeIsLeftOutOfEveryRange) {
  Matrix u = RandomUpdates(6, kThreeParts, 31);
  const std::vector<double> w = RandomWeights(6, 32);
  // Update 1 is bad only in the middle range, update 4 only in the last one (its last block).
  u[1][kThreeParts / 2] = std::numeric_limits<float>::quiet_NaN();
  u[4][kThreeParts - 3] = -std::numeric_limits<float>::infinity();
  WeightedAverage avg(kThreeParts, 3);
  const std::vector<absl::Status> st = avg.AddBatch(Spans(u), w);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(st[i].ok(), i != 1 && i != 4) << i;
  EXPECT_NE(st[1].message().find(std::to_string(kThreeParts / 2)), std::string::npos);
  EXPECT_NE(st[4].message().find(std::to_string(kThreeParts - 3)), std::string::npos);
  EXPECT_EQ(avg.count(), 4);
  EXPECT_EQ(avg.total_weight(), w[0] + w[2] + w[3] + w[5]);
  const Matrix kept = {u[0], u[2], u[3], u[5]};
  // One fold rounding of a value that included both, and up to two take-backs, each a rounding
  // of a value that included what was left of them: within 3 roundings of all of it.
  std::vector<float> dropped(kThreeParts);
  for (size_t j = 0; j < kThreeParts; ++j) {
    const double a = std::isfinite(u[1][j]) ? std::fabs(w[1] * u[1][j]) : 0;
    const double b = std::isfinite(u[4][j]) ? std::fabs(w[4] * u[4][j]) : 0;
    dropped[j] = static_cast<float>(a + b);
  }
  ExpectWithinBound(avg, kept, {w[0], w[2], w[3], w[5]}, /*folds=*/3, &dropped, 3.0);
}

TEST(WeightedAverageTest, OnThreadsABatchWhoseEveryUpdateIsBadLeavesTheMeanAsItWas) {
  const Matrix base = RandomUpdates(2, kThreeParts, 41);
  Matrix bad = RandomUpdates(2, kThreeParts, 42);
  bad[0][10] = std::numeric_limits<float>::infinity();
  bad[1][kThreeParts - 1] = std::numeric_limits<float>::quiet_NaN();
  WeightedAverage avg(kThreeParts, 3);
  for (const absl::Status& s : avg.AddBatch(Spans(base), std::vector<double>{2.0, 3.0})) {
    ASSERT_TRUE(s.ok());
  }
  for (const absl::Status& s : avg.AddBatch(Spans(bad), std::vector<double>{5.0, 7.0})) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(avg.count(), 2);
  EXPECT_EQ(avg.total_weight(), 5.0);
  // The second fold's rounding and up to two take-backs, each of a value that included what
  // was left of the bad updates.
  std::vector<float> dropped(kThreeParts);
  for (size_t j = 0; j < kThreeParts; ++j) {
    dropped[j] = (std::isfinite(bad[0][j]) ? std::fabs(bad[0][j]) * 5.0f : 0.0f) +
                 (std::isfinite(bad[1][j]) ? std::fabs(bad[1][j]) * 7.0f : 0.0f);
  }
  ExpectWithinBound(avg, base, {2.0, 3.0}, /*folds=*/4, &dropped, 3.0);
}

TEST(WeightedAverageTest, MismatchedWeightsRejectTheWholeBatch) {
  WeightedAverage avg(1);
  const Matrix u = {{1}, {2}};
  const std::vector<absl::Status> st = avg.AddBatch(Spans(u), std::vector<double>{1.0});
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(avg.count(), 0);
}

TEST(WeightedAverageTest, ResetStartsANewRound) {
  WeightedAverage avg(2);
  const std::vector<float> a = {5, 5}, b = {1, 3};
  ASSERT_TRUE(avg.Add(a, 2.0).ok());
  avg.Reset();
  EXPECT_EQ(avg.count(), 0);
  EXPECT_EQ(avg.mean()[0], 0.0f);
  ASSERT_TRUE(avg.Add(b, 7.0).ok());
  EXPECT_EQ(avg.mean()[0], 1.0f);
  EXPECT_EQ(avg.mean()[1], 3.0f);
  EXPECT_EQ(avg.total_weight(), 7.0);
}

// Release gives a large mean's pages back; the next round folds into fresh zeros, exactly as
// after Reset, whether the update lands in whole pages or in the partial ones at either end.
TEST(WeightedAverageTest, ReleaseStartsANewRoundWithTheMeansMemoryGivenBack) {
  const size_t d = (size_t{1} << 20) + 3;
  WeightedAverage avg(d), reference(d);
  std::vector<float> a(d, 4.0f), b(d);
  for (size_t i = 0; i < d; ++i) b[i] = static_cast<float>(i % 17) - 8;
  ASSERT_TRUE(avg.Add(a, 2.0).ok());
  avg.Release();
  EXPECT_EQ(avg.count(), 0);
  ASSERT_TRUE(avg.AddDamped(b, 3.0, 0.5).ok());
  ASSERT_TRUE(reference.AddDamped(b, 3.0, 0.5).ok());
  ASSERT_TRUE(std::equal(avg.mean().begin(), avg.mean().end(), reference.mean().begin()));
  EXPECT_EQ(avg.total_weight(), 3.0);
}

TEST(WeightedAverageTest, MeanOfNothingIsAnError) {
  WeightedAverage avg(2);
  std::vector<float> out(2);
  EXPECT_EQ(avg.Mean(absl::MakeSpan(out)).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace sextant
