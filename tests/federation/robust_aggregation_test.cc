#include "federation/robust_aggregation.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

using Matrix = std::vector<std::vector<float>>;

// Values drawn from a small set so that ties are common.
Matrix RandomUpdates(size_t n, size_t d, uint32_t seed, bool with_ties) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  Matrix u(n, std::vector<float>(d));
  for (auto& row : u) {
    for (float& x : row)
      x = with_ties ? static_cast<float>(static_cast<int>(rng() % 5) - 2) : normal(rng);
  }
  return u;
}

std::vector<absl::Span<const float>> Spans(const Matrix& m) { return {m.begin(), m.end()}; }

// The k-th smallest (0-based) of a column by counting, without sorting: the value v with
// #{x < v} <= k < #{x <= v}.
float RankByCounting(const std::vector<float>& col, size_t k) {
  for (float v : col) {
    size_t less = 0, less_equal = 0;
    for (float x : col) {
      less += x < v;
      less_equal += x <= v;
    }
    if (less <= k && k < less_equal) return v;
  }
  ADD_FAILURE() << "no rank " << k;
  return 0;
}

std::vector<float> Column(const Matrix& u, size_t j) {
  std::vector<float> c;
  for (const auto& row : u) c.push_back(row[j]);
  return c;
}

TEST(RobustAggregationTest, MedianMatchesRankCountingForOddAndEvenN) {
  for (bool ties : {false, true}) {
    for (size_t n : {1, 2, 5, 6, 11}) {
      const Matrix u = RandomUpdates(n, 40, 10 * n + ties, ties);
      std::vector<float> out(40);
      ASSERT_TRUE(CoordinateMedian(Spans(u), absl::MakeSpan(out)).ok());
      for (size_t j = 0; j < 40; ++j) {
        const std::vector<float> c = Column(u, j);
        const float want = n % 2 ? RankByCounting(c, n / 2)
                                 : (RankByCounting(c, n / 2 - 1) + RankByCounting(c, n / 2)) / 2;
        ASSERT_FLOAT_EQ(out[j], want) << "n=" << n << " j=" << j;
      }
    }
  }
}

TEST(RobustAggregationTest, TrimmedMeanMatchesRepeatedRemovalOfExtremes) {
  for (bool ties : {false, true}) {
    for (auto [n, beta] :
         {std::pair<size_t, double>{10, 0.1}, {10, 0.25}, {7, 0.2}, {5, 0.0}, {9, 0.49}}) {
      const Matrix u = RandomUpdates(n, 30, static_cast<uint32_t>(n * 100 + beta * 100), ties);
      std::vector<float> out(30);
      ASSERT_TRUE(TrimmedMean(Spans(u), beta, absl::MakeSpan(out)).ok());
      const size_t k = static_cast<size_t>(std::floor(beta * n));
      for (size_t j = 0; j < 30; ++j) {
        std::vector<float> c = Column(u, j);
        for (size_t r = 0; r < k; ++r) {
          c.erase(std::min_element(c.begin(), c.end()));
          c.erase(std::max_element(c.begin(), c.end()));
        }
        double sum = 0;
        for (float x : c) sum += x;
        ASSERT_NEAR(out[j], sum / c.size(), 1e-5) << "n=" << n << " beta=" << beta;
      }
    }
  }
}

TEST(RobustAggregationTest, TrimmedMeanRejectsBetaThatLeavesNothing) {
  const Matrix u = RandomUpdates(4, 3, 1, false);
  std::vector<float> out(3);
  EXPECT_EQ(TrimmedMean(Spans(u), 0.5, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(TrimmedMean(Spans(u), -0.1, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
}

// Krum by definition: all pairwise squared distances in long double, full sort.
std::vector<long double> BruteKrumScores(const Matrix& u, size_t f) {
  const size_t n = u.size();
  std::vector<long double> scores;
  for (size_t i = 0; i < n; ++i) {
    std::vector<long double> d;
    for (size_t j = 0; j < n; ++j) {
      if (j == i) continue;
      long double s = 0;
      for (size_t k = 0; k < u[i].size(); ++k) {
        const long double diff = static_cast<long double>(u[i][k]) - u[j][k];
        s += diff * diff;
      }
      d.push_back(s);
    }
    std::sort(d.begin(), d.end());
    long double score = 0;
    for (size_t k = 0; k < n - f - 2; ++k) score += d[k];
    scores.push_back(score);
  }
  return scores;
}

TEST(RobustAggregationTest, KrumScoresAndChoiceMatchBruteForce) {
  for (auto [n, f] : {std::pair<size_t, size_t>{5, 1}, {7, 2}, {12, 3}, {20, 0}}) {
    const Matrix u = RandomUpdates(n, 25, static_cast<uint32_t>(n + 31 * f), false);
    const std::vector<long double> want = BruteKrumScores(u, f);
    absl::StatusOr<std::vector<double>> scores = KrumScores(Spans(u), f);
    ASSERT_TRUE(scores.ok()) << scores.status();
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR((*scores)[i], want[i], 1e-9 * want[i]);
    const size_t best = std::min_element(want.begin(), want.end()) - want.begin();
    std::vector<float> out(25);
    absl::StatusOr<size_t> chosen = Krum(Spans(u), f, absl::MakeSpan(out));
    ASSERT_TRUE(chosen.ok());
    EXPECT_EQ(*chosen, best);
    EXPECT_EQ(out, u[best]);
  }
}

TEST(RobustAggregationTest, MultiKrumAveragesTheBestScoredAndBreaksTiesByIndex) {
  // Updates 0 and 1 are identical, so they tie; the lower index must come first.
  Matrix u = RandomUpdates(9, 6, 5, false);
  u[1] = u[0];
  const std::vector<long double> want = BruteKrumScores(u, 2);
  std::vector<size_t> order(9);
  for (size_t i = 0; i < 9; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return want[a] < want[b]; });
  order.resize(4);
  std::vector<float> out(6);
  absl::StatusOr<std::vector<size_t>> chosen = MultiKrum(Spans(u), 2, 4, absl::MakeSpan(out));
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(*chosen, order);
  for (size_t j = 0; j < 6; ++j) {
    double sum = 0;
    for (size_t i : order) sum += u[i][j];
    EXPECT_NEAR(out[j], sum / 4, 1e-6);
  }
}

TEST(RobustAggregationTest, KrumIgnoresByzantineOutliers) {
  Matrix u = RandomUpdates(7, 10, 9, false);
  for (float& x : u[2]) x = 1e4f;
  for (float& x : u[5]) x = -1e4f;
  std::vector<float> out(10);
  absl::StatusOr<std::vector<size_t>> chosen = MultiKrum(Spans(u), 2, 5, absl::MakeSpan(out));
  ASSERT_TRUE(chosen.ok());
  for (size_t i : *chosen) EXPECT_TRUE(i != 2 && i != 5) << i;
}

TEST(RobustAggregationTest, RejectsTooFewClientsForKrumAndBadShapes) {
  const Matrix u = RandomUpdates(6, 3, 2, false);
  std::vector<float> out(3);
  EXPECT_EQ(Krum(Spans(u), 2, absl::MakeSpan(out)).status().code(),
            absl::StatusCode::kInvalidArgument);  // needs 2f + 3 = 7
  EXPECT_TRUE(Krum(Spans(u), 1, absl::MakeSpan(out)).ok());
  EXPECT_EQ(MultiKrum(Spans(u), 1, 0, absl::MakeSpan(out)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MultiKrum(Spans(u), 1, 7, absl::MakeSpan(out)).status().code(),
            absl::StatusCode::kInvalidArgument);
  Matrix ragged = u;
  ragged[3].push_back(1);
  EXPECT_EQ(CoordinateMedian(Spans(ragged), absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CoordinateMedian({}, absl::MakeSpan(out)).code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> wrong(4);
  EXPECT_EQ(TrimmedMean(Spans(u), 0.1, absl::MakeSpan(wrong)).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant
