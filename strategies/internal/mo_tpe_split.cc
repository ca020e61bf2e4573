#include "strategies/internal/mo_tpe_split.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "strategies/pareto.h"

namespace sextant::internal {
namespace {

constexpr double kEps = 1e-12;

}  // namespace

std::vector<double> MotpeReference(const std::vector<std::vector<double>>& points) {
  std::vector<double> worst = points.front();
  for (const auto& p : points) {
    for (size_t d = 0; d < worst.size(); ++d) worst[d] = std::max(worst[d], p[d]);
  }
  for (double& w : worst) w = w == 0 ? kEps : std::max(1.1 * w, 0.9 * w);
  return worst;
}

std::vector<double> MotpeReference(const std::vector<std::vector<double>>& points,
                                   absl::Span<const double> given) {
  const std::vector<double> derived = MotpeReference(points);
  std::vector<double> reference = derived;
  for (size_t d = 0; d < reference.size() && d < given.size(); ++d) {
    if (std::isfinite(given[d])) reference[d] = given[d];
  }
  const auto inside = [&reference](const std::vector<double>& p) {
    for (size_t d = 0; d < reference.size(); ++d) {
      if (!(p[d] < reference[d])) return false;
    }
    return true;
  };
  return std::any_of(points.begin(), points.end(), inside) ? reference : derived;
}

std::vector<int> GreedyHypervolumeSubset(const std::vector<std::vector<double>>& points,
                                         absl::Span<const int> candidates, int k,
                                         absl::Span<const double> reference) {
  std::vector<int> chosen;
  std::vector<std::vector<double>> chosen_points;
  std::vector<bool> taken(candidates.size(), false);
  k = std::min<int>(k, static_cast<int>(candidates.size()));
  while (static_cast<int>(chosen.size()) < k) {
    int best = -1;
    double best_volume = -1;
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (taken[c]) continue;
      // The largest union volume is the largest gain over the chosen ones.
      chosen_points.push_back(points[candidates[c]]);
      const double v = Hypervolume(chosen_points, reference);
      chosen_points.pop_back();
      if (v > best_volume) {
        best_volume = v;
        best = static_cast<int>(c);
      }
    }
    taken[best] = true;
    chosen.push_back(candidates[best]);
    chosen_points.push_back(points[candidates[best]]);
  }
  return chosen;
}

std::vector<int> MotpeBelow(const std::vector<std::vector<double>>& points, int n_below,
                            absl::Span<const double> reference) {
  n_below = std::clamp<int>(n_below, 0, static_cast<int>(points.size()));
  if (n_below == 0) return {};
  const std::vector<int> ranks = NonDominatedRanks(points);
  const int fronts = *std::max_element(ranks.begin(), ranks.end()) + 1;
  std::vector<std::vector<int>> by_rank(fronts);
  for (int i = 0; i < static_cast<int>(points.size()); ++i) by_rank[ranks[i]].push_back(i);
  std::vector<int> below;
  int rank = 0;
  while (below.size() + by_rank[rank].size() <= static_cast<size_t>(n_below)) {
    below.insert(below.end(), by_rank[rank].begin(), by_rank[rank].end());
    if (++rank == fronts) break;
  }
  const int rest = n_below - static_cast<int>(below.size());
  if (rest > 0) {
    std::vector<std::vector<double>> front;
    for (int i : by_rank[rank]) front.push_back(points[i]);
    const std::vector<int> picked =
        GreedyHypervolumeSubset(points, by_rank[rank], rest, MotpeReference(front, reference));
    below.insert(below.end(), picked.begin(), picked.end());
  }
  std::sort(below.begin(), below.end());
  return below;
}

std::vector<double> MotpeBelowWeights(const std::vector<std::vector<double>>& below,
                                      absl::Span<const double> reference) {
  if (below.size() <= 1) return std::vector<double>(below.size(), 1.0);
  std::vector<double> weights = HypervolumeContributions(below, MotpeReference(below, reference));
  for (double& w : weights) w += kEps;
  const double top = *std::max_element(weights.begin(), weights.end());
  for (double& w : weights) w = std::clamp(w / top, 0.0, 1.0);
  return weights;
}

}  // namespace sextant::internal
