#include "strategies/pareto.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sextant {
namespace {

using Points = std::vector<std::vector<double>>;

Points RandomPoints(int n, int dims, uint64_t seed, int grid = 0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Points points(n, std::vector<double>(dims));
  for (auto& p : points) {
    for (double& x : p) x = grid > 0 ? std::floor(u(rng) * grid) / grid : u(rng);
  }
  return points;
}

// Points on the simplex sum(x) = 1: every one is on the Pareto front.
Points SimplexFront(int n, int dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> e(1);
  Points points(n, std::vector<double>(dims));
  for (auto& p : points) {
    double sum = 0;
    for (double& x : p) sum += x = e(rng);
    for (double& x : p) x /= sum;
  }
  return points;
}

// The exact union volume by brute force: every cell of the grid formed by all coordinates is
// either inside the dominated region or not.
double BruteHypervolume(const Points& points, const std::vector<double>& ref) {
  const size_t dims = ref.size();
  std::vector<std::vector<double>> axes(dims);
  for (size_t d = 0; d < dims; ++d) {
    for (const auto& p : points) {
      if (p[d] < ref[d]) axes[d].push_back(p[d]);
    }
    axes[d].push_back(ref[d]);
    std::sort(axes[d].begin(), axes[d].end());
    axes[d].erase(std::unique(axes[d].begin(), axes[d].end()), axes[d].end());
  }
  std::vector<size_t> cell(dims, 0);
  double volume = 0;
  while (true) {
    bool valid = true;
    for (size_t d = 0; d < dims; ++d) valid = valid && cell[d] + 1 < axes[d].size();
    if (valid) {
      bool covered = false;
      for (const auto& p : points) {
        bool inside = true;
        for (size_t d = 0; d < dims && inside; ++d) inside = p[d] <= axes[d][cell[d]];
        if (inside) {
          covered = true;
          break;
        }
      }
      if (covered) {
        double v = 1;
        for (size_t d = 0; d < dims; ++d) v *= axes[d][cell[d] + 1] - axes[d][cell[d]];
        volume += v;
      }
    }
    size_t d = 0;
    while (d < dims && ++cell[d] >= axes[d].size()) cell[d++] = 0;
    if (d == dims) break;
  }
  return volume;
}

std::vector<int> BruteRanks(const Points& points) {
  const int n = static_cast<int>(points.size());
  std::vector<int> ranks(n, -1);
  for (int rank = 0, left = n; left > 0; ++rank) {
    std::vector<int> front;
    for (int i = 0; i < n; ++i) {
      if (ranks[i] >= 0) continue;
      bool dominated = false;
      for (int j = 0; j < n && !dominated; ++j) {
        dominated = ranks[j] < 0 && Dominates(points[j], points[i]);
      }
      if (!dominated) front.push_back(i);
    }
    for (int i : front) ranks[i] = rank;
    left -= static_cast<int>(front.size());
  }
  return ranks;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(ParetoTest, DominatesNeedsOneStrictImprovement) {
  EXPECT_TRUE(Dominates(std::vector<double>{1, 2}, std::vector<double>{1, 3}));
  EXPECT_FALSE(Dominates(std::vector<double>{1, 2}, std::vector<double>{1, 2}));
  EXPECT_FALSE(Dominates(std::vector<double>{1, 3}, std::vector<double>{2, 2}));
}

TEST(ParetoTest, ConstrainedDominatesPrefersFeasibleThenSmallerViolation) {
  std::vector<double> good{0, 0}, bad{5, 5};
  EXPECT_TRUE(ConstrainedDominates(bad, 0, good, 0.1));  // feasible beats infeasible
  EXPECT_FALSE(ConstrainedDominates(good, 0.1, bad, 0));
  EXPECT_TRUE(ConstrainedDominates(bad, 1, good, 2));   // smaller violation wins
  EXPECT_FALSE(ConstrainedDominates(good, 2, bad, 2));  // equal violations: neither
  EXPECT_TRUE(ConstrainedDominates(good, -1, bad, 0));  // both feasible: Pareto
  EXPECT_FALSE(ConstrainedDominates(bad, 0, good, -3));
  EXPECT_TRUE(ConstrainedDominates(bad, 3, good, std::numeric_limits<double>::infinity()));
}

TEST(ParetoTest, RanksMatchBruteForce) {
  for (int dims = 1; dims <= 4; ++dims) {
    for (uint64_t seed = 0; seed < 5; ++seed) {
      // A coarse grid makes ties and duplicates common.
      Points points = RandomPoints(120, dims, seed * 10 + dims, seed % 2 ? 6 : 0);
      EXPECT_EQ(NonDominatedRanks(points), BruteRanks(points)) << dims << " " << seed;
    }
  }
}

TEST(ParetoTest, EqualPointsShareRank) {
  Points points{{1, 1}, {1, 1}, {2, 2}, {2, 2}, {0, 3}};
  EXPECT_EQ(NonDominatedRanks(points), (std::vector<int>{0, 0, 1, 1, 0}));
  EXPECT_EQ(ParetoFront(points), (std::vector<int>{0, 1, 4}));
}

TEST(ParetoTest, InfeasiblePointsRankAfterFeasibleByViolation) {
  Points points{{0, 0}, {1, 1}, {2, 2}, {0, 0}, {3, 3}};
  std::vector<double> violations{2, 0, 0, 1, 2};
  EXPECT_EQ(NonDominatedRanks(points, violations), (std::vector<int>{3, 0, 1, 2, 3}));
}

TEST(ParetoTest, CrowdingDistancesMatchHandComputedExample) {
  // Front (sorted by f0): (0,4) (1,2) (3,1) (4,0); ranges 4 and 4.
  Points points{{1, 2}, {4, 0}, {0, 4}, {3, 1}, {9, 9}};
  std::vector<int> members{0, 1, 2, 3};
  std::vector<double> d = CrowdingDistances(points, members);
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(d[1], inf);
  EXPECT_EQ(d[2], inf);
  EXPECT_DOUBLE_EQ(d[0], (3.0 - 0.0) / 4 + (4.0 - 1.0) / 4);
  EXPECT_DOUBLE_EQ(d[3], (4.0 - 1.0) / 4 + (2.0 - 0.0) / 4);
  EXPECT_EQ(CrowdingDistances(points, std::vector<int>{0, 4}), (std::vector<double>{inf, inf}));
}

TEST(ParetoTest, HypervolumeMatchesBruteForce) {
  for (int dims = 2; dims <= 4; ++dims) {
    for (uint64_t seed = 0; seed < 6; ++seed) {
      int n = dims == 4 ? 18 : 40;
      Points points = seed % 3 == 2 ? SimplexFront(n, dims, seed)
                                    : RandomPoints(n, dims, seed, seed % 3 ? 5 : 0);
      std::vector<double> ref(dims, 0.9);
      double expected = BruteHypervolume(points, ref);
      EXPECT_NEAR(Hypervolume(points, ref), expected, 1e-12) << dims << " " << seed;
    }
  }
}

TEST(ParetoTest, HypervolumeOfOnePointIsItsBox) {
  EXPECT_DOUBLE_EQ(Hypervolume({{1, 2, 3}}, std::vector<double>{2, 4, 7}), 1 * 2 * 4);
  EXPECT_DOUBLE_EQ(Hypervolume({{1, 2, 3, 0}}, std::vector<double>{2, 4, 7, 1}), 8);
  EXPECT_DOUBLE_EQ(Hypervolume({{1, 2}}, std::vector<double>{2, 4}), 2);
}

TEST(ParetoTest, HypervolumeIsZeroWhenNoPointBeatsReference) {
  for (int dims = 2; dims <= 4; ++dims) {
    std::vector<double> ref(dims, 0.5);
    Points points{std::vector<double>(dims, 0.7), std::vector<double>(dims, 0.5)};
    points[0][0] = 0.1;  // better in one objective only
    EXPECT_EQ(Hypervolume(points, ref), 0) << dims;
    EXPECT_EQ(Hypervolume({}, ref), 0) << dims;
  }
}

TEST(ParetoTest, HypervolumeIgnoresDuplicates) {
  Points points{{0.2, 0.5, 0.1}, {0.5, 0.2, 0.3}, {0.2, 0.5, 0.1}, {0.5, 0.2, 0.3}};
  Points unique{{0.2, 0.5, 0.1}, {0.5, 0.2, 0.3}};
  std::vector<double> ref{1, 1, 1};
  EXPECT_DOUBLE_EQ(Hypervolume(points, ref), Hypervolume(unique, ref));
  EXPECT_NEAR(Hypervolume(points, ref), BruteHypervolume(unique, ref), 1e-15);
}

TEST(ParetoTest, HypervolumeOfTenThousandPointsIsFast) {
  // A whole 4-D front is exponential in the worst case for every exact algorithm; 1000 points.
  for (int dims = 2; dims <= 4; ++dims) {
    int n = dims == 4 ? 1000 : 10000;
    Points front = SimplexFront(n, dims, 7);
    std::vector<double> ref(dims, 1.1);
    auto start = std::chrono::steady_clock::now();
    double hv = Hypervolume(front, ref);
    double seconds = Seconds(start);
    EXPECT_GT(hv, 0);
    EXPECT_LT(hv, std::pow(1.1, dims));
    EXPECT_LT(seconds, 5.0) << dims;  // generous for a loaded machine
    std::printf("Hypervolume of a %d-D front of %d points: %.3f s\n", dims, n, seconds);
  }
}

TEST(ParetoTest, HypervolumeOfTenThousandDuplicateHeavy4DPointsIsFast) {
  Points base = RandomPoints(60, 4, 3);
  Points points;
  for (int i = 0; i < 10000; ++i) points.push_back(base[(i * 7) % base.size()]);
  Points uniform = RandomPoints(10000, 4, 4);
  std::vector<double> ref(4, 1);
  auto start = std::chrono::steady_clock::now();
  EXPECT_NEAR(Hypervolume(points, ref), Hypervolume(base, ref), 1e-12);
  EXPECT_GT(Hypervolume(uniform, ref), 0.9);
  EXPECT_LT(Seconds(start), 5.0);
}

TEST(ParetoTest, ContributionsAreExclusiveVolumes) {
  for (int dims = 2; dims <= 4; ++dims) {
    for (uint64_t seed = 0; seed < 3; ++seed) {
      Points points = RandomPoints(25, dims, seed + 100, seed == 1 ? 4 : 0);
      points.push_back(points[3]);  // a duplicate contributes nothing, nor does its twin
      std::vector<double> ref(dims, 0.95);
      std::vector<double> c = HypervolumeContributions(points, ref);
      double all = Hypervolume(points, ref);
      std::vector<int> ranks = NonDominatedRanks(points);
      for (size_t i = 0; i < points.size(); ++i) {
        Points others = points;
        others.erase(others.begin() + i);
        EXPECT_NEAR(c[i], all - Hypervolume(others, ref), 1e-12) << dims << " " << i;
        if (ranks[i] > 0) {
          EXPECT_EQ(c[i], 0);
        }
      }
      EXPECT_EQ(c[3], 0);
    }
  }
}

TEST(ParetoTest, TwoDimensionalContributionsFromNeighbours) {
  Points points{{1, 3}, {2, 2}, {3, 1}, {3, 3}, {5, 0}};
  std::vector<double> c = HypervolumeContributions(points, std::vector<double>{4, 4});
  EXPECT_EQ(c, (std::vector<double>{1, 1, 1, 0, 0}));
}

}  // namespace
}  // namespace sextant
