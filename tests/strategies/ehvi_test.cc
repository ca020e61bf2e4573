#include "strategies/internal/ehvi.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "strategies/acquisition.h"

namespace sextant::internal {
namespace {

using Points = std::vector<std::vector<double>>;

// Hypervolume by inclusion–exclusion over every subset: exponential, but independent of the
// box decomposition under test and exact for the few points used here.
double BruteHypervolume(const Points& points, const std::vector<double>& reference) {
  const size_t n = points.size();
  double total = 0;
  for (uint32_t mask = 1; mask < (1u << n); ++mask) {
    double volume = 1;
    for (size_t k = 0; k < reference.size(); ++k) {
      double corner = -INFINITY;
      for (size_t i = 0; i < n; ++i) {
        if (mask & (1u << i)) corner = std::max(corner, points[i][k]);
      }
      volume *= std::max(0.0, reference[k] - corner);
    }
    total += (__builtin_popcount(mask) % 2 == 1 ? 1 : -1) * volume;
  }
  return total;
}

double Improvement(const Points& front, const std::vector<double>& y,
                   const std::vector<double>& reference) {
  Points with = front;
  with.push_back(y);
  return BruteHypervolume(with, reference) - BruteHypervolume(front, reference);
}

struct Estimate {
  double mean = 0;
  double standard_error = 0;
};

Estimate MonteCarloEhvi(const Points& front, const std::vector<double>& reference,
                        const std::vector<double>& mean, const std::vector<double>& sd,
                        int samples) {
  std::mt19937_64 engine(42);
  std::normal_distribution<double> normal;
  double sum = 0, sum2 = 0;
  std::vector<double> y(mean.size());
  for (int s = 0; s < samples; ++s) {
    for (size_t k = 0; k < y.size(); ++k) y[k] = mean[k] + sd[k] * normal(engine);
    const double v = Improvement(front, y, reference);
    sum += v;
    sum2 += v * v;
  }
  const double m = sum / samples;
  return {m, std::sqrt((sum2 / samples - m * m) / samples)};
}

TEST(EhviBoxesTest, MatchesMonteCarloInTwoObjectives) {
  const Points front = {{1, 3}, {2, 2}, {3, 1}, {2.5, 2.5}};  // the last is dominated
  const std::vector<double> reference = {4, 4};
  const EhviBoxes boxes(front, reference);
  EXPECT_EQ(boxes.boxes(), 4);  // one per front point and one more
  for (const auto& [mean, sd] : std::vector<std::pair<std::vector<double>, std::vector<double>>>{
           {{1.5, 1.5}, {0.5, 0.7}}, {{3, 3}, {1, 0.3}}, {{0, 4.5}, {0.4, 1}}}) {
    const Estimate mc = MonteCarloEhvi(front, reference, mean, sd, 100000);
    EXPECT_NEAR(boxes.Ehvi(mean, sd), mc.mean, 4 * mc.standard_error + 1e-9)
        << mean[0] << "," << mean[1];
  }
}

TEST(EhviBoxesTest, MatchesMonteCarloInThreeObjectives) {
  const Points front = {{1, 3, 2}, {2, 2, 2.5}, {3, 1, 1}, {1.5, 2.5, 3}, {2, 3, 3}};
  const std::vector<double> reference = {4, 4, 4};
  const EhviBoxes boxes(front, reference);
  for (const auto& [mean, sd] : std::vector<std::pair<std::vector<double>, std::vector<double>>>{
           {{1.5, 1.5, 1.5}, {0.5, 0.7, 0.6}}, {{2.5, 2.5, 2.5}, {1, 0.3, 0.8}}}) {
    const Estimate mc = MonteCarloEhvi(front, reference, mean, sd, 50000);
    EXPECT_NEAR(boxes.Ehvi(mean, sd), mc.mean, 4 * mc.standard_error + 1e-9);
  }
}

TEST(EhviBoxesTest, CertainPredictionGivesTheExactImprovement) {
  const Points front = {{1, 3, 2}, {2, 2, 2.5}, {3, 1, 1}, {1.5, 2.5, 3}};
  const std::vector<double> reference = {4, 4, 4};
  const EhviBoxes boxes(front, reference);
  const std::vector<double> y = {1.2, 1.7, 2.2};
  EXPECT_NEAR(boxes.Ehvi(y, {1e-9, 1e-9, 1e-9}), Improvement(front, y, reference), 1e-6);
  const Points front4 = {{1, 3, 2, 2}, {2, 2, 2.5, 1}, {3, 1, 1, 3}, {1.5, 2.5, 3, 0.5}};
  const EhviBoxes boxes4(front4, {4, 4, 4, 4});
  const std::vector<double> y4 = {1.2, 1.7, 2.2, 2.1};
  EXPECT_NEAR(boxes4.Ehvi(y4, {1e-9, 1e-9, 1e-9, 1e-9}), Improvement(front4, y4, {4, 4, 4, 4}),
              1e-6);
  const Points front2 = {{1, 3}, {2, 2}, {3, 1}};
  const EhviBoxes boxes2(front2, {4, 4});
  EXPECT_NEAR(boxes2.Ehvi({0.5, 0.5}, {1e-9, 1e-9}), Improvement(front2, {0.5, 0.5}, {4, 4}), 1e-6);
}

TEST(EhviBoxesTest, NearZeroDeepInTheDominatedRegionAndPositiveBeyondTheFront) {
  const EhviBoxes boxes({{1, 3}, {2, 2}, {3, 1}}, {4, 4});
  const double deep = boxes.Ehvi({3.5, 3.5}, {0.05, 0.05});
  const double beyond = boxes.Ehvi({1.5, 1.5}, {0.05, 0.05});
  EXPECT_LT(deep, 1e-12);
  EXPECT_GT(beyond, 0.2);
  // Log space still ranks points whose EHVI underflows.
  const double log_deep = boxes.LogEhvi({3.5, 3.5}, {0.05, 0.05});
  const double log_deeper = boxes.LogEhvi({3.9, 3.9}, {0.05, 0.05});
  EXPECT_TRUE(std::isfinite(log_deeper));
  EXPECT_LT(log_deeper, log_deep);
}

TEST(EhviBoxesTest, EmptyFrontIsTheWholeBoxBelowTheReference) {
  // Points at or beyond the reference bound nothing and are ignored.
  const EhviBoxes boxes({{4, 1}, {5, 5}}, {4, 4});
  EXPECT_EQ(boxes.boxes(), 1);
  const double mean = 3, sd = 0.5;
  const double one = sd * std::exp(LogH((4 - mean) / sd));
  EXPECT_NEAR(boxes.Ehvi({mean, mean}, {sd, sd}), one * one, 1e-12);
}

TEST(EhviBoxesTest, SameInputsGiveBitIdenticalResults) {
  const Points front = {{1, 3, 2}, {2, 2, 2.5}, {3, 1, 1}};
  const EhviBoxes a(front, {4, 4, 4});
  const EhviBoxes b(front, {4, 4, 4});
  EXPECT_EQ(a.LogEhvi({2, 2, 2}, {0.3, 0.4, 0.5}), b.LogEhvi({2, 2, 2}, {0.3, 0.4, 0.5}));
}

TEST(LogNormalCdfTest, MatchesTheDistributionAndKeepsGoingInTheTail) {
  for (double z : {-3.0, -0.5, 0.0, 0.7, 4.0}) {
    EXPECT_NEAR(LogNormalCdf(z), std::log(0.5 * std::erfc(-z / std::sqrt(2.0))), 1e-12);
  }
  // log Φ(-40) ≈ -z²/2 - log(-z·sqrt(2π)) - 1/z².
  EXPECT_NEAR(LogNormalCdf(-40), -800 - std::log(40 * std::sqrt(2 * M_PI)) - 1.0 / 1600, 1e-6);
  EXPECT_NEAR(LogNormalCdf(10), -7.6e-24, 1e-25);
}

}  // namespace
}  // namespace sextant::internal
