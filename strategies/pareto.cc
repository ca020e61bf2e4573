#include "strategies/pareto.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

namespace sextant {
namespace {

using Point = std::vector<double>;

bool Feasible(double violation) { return violation <= 0; }

// Indices 0..n-1 sorted lexicographically by their points (ties by index, for determinism).
std::vector<int> LexOrder(const std::vector<Point>& points, const std::vector<int>& subset) {
  std::vector<int> order = subset;
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (points[a] != points[b]) return points[a] < points[b];
    return a < b;
  });
  return order;
}

// Whether some member of front dominates p. Members are in lexicographic order, so later ones
// are the likelier dominators (they are closer to p); with two objectives the last member is
// the only candidate.
bool FrontDominates(const std::vector<Point>& points, const std::vector<int>& front, int p) {
  if (points[p].size() == 2) return Dominates(points[front.back()], points[p]);
  for (auto it = front.rbegin(); it != front.rend(); ++it) {
    if (Dominates(points[*it], points[p])) return true;
  }
  return false;
}

// Efficient non-dominated sort with binary search over fronts (Zhang et al. 2015). In
// lexicographic order no later point dominates an earlier one, and "dominated by front k" is
// monotone in k, so each point's front is found by binary search. Ranks are written into
// ranks[i] + offset. Returns the number of fronts.
int SortFronts(const std::vector<Point>& points, const std::vector<int>& subset, int offset,
               std::vector<int>& ranks) {
  std::vector<std::vector<int>> fronts;
  for (int p : LexOrder(points, subset)) {
    size_t lo = 0, hi = fronts.size();
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (FrontDominates(points, fronts[mid], p)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    if (lo == fronts.size()) fronts.emplace_back();
    fronts[lo].push_back(p);
    ranks[p] = offset + static_cast<int>(lo);
  }
  return static_cast<int>(fronts.size());
}

// The distinct non-dominated points of pts, in lexicographic order.
std::vector<Point> NonDominatedUnique(std::vector<Point> pts) {
  std::sort(pts.begin(), pts.end());
  pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
  std::vector<Point> front;
  for (Point& p : pts) {
    bool dominated = false;
    for (auto it = front.rbegin(); it != front.rend() && !dominated; ++it) {
      dominated = Dominates(*it, p);
    }
    if (!dominated) front.push_back(std::move(p));
  }
  return front;
}

double BoxVolume(const Point& p, absl::Span<const double> reference) {
  double v = 1;
  for (size_t d = 0; d < p.size(); ++d) v *= reference[d] - p[d];
  return v;
}

double Hypervolume2D(std::vector<Point> pts, absl::Span<const double> ref) {
  std::sort(pts.begin(), pts.end());
  double area = 0, best_y = ref[1];
  for (const Point& p : pts) {
    if (p[1] < best_y) {
      area += (ref[0] - p[0]) * (best_y - p[1]);
      best_y = p[1];
    }
  }
  return area;
}

// A 2-D staircase (x ascending, y strictly descending) with its dominated area, for the 3-D
// sweep. Every point is inserted and erased at most once: O(log n) amortised per insertion.
class Staircase {
 public:
  Staircase(double ref_x, double ref_y) : ref_x_(ref_x), ref_y_(ref_y) {}
  double area() const { return area_; }

  void Insert(double x, double y) {
    auto it = steps_.lower_bound(x);
    if (it != steps_.end() && it->first == x && it->second <= y) return;
    double height = ref_y_;
    if (it != steps_.begin()) {
      height = std::prev(it)->second;
      if (height <= y) return;
    }
    double cur_x = x;
    while (it != steps_.end() && it->second >= y) {
      area_ += (it->first - cur_x) * (height - y);
      cur_x = it->first;
      height = it->second;
      it = steps_.erase(it);
    }
    double end_x = it == steps_.end() ? ref_x_ : it->first;
    area_ += (end_x - cur_x) * (height - y);
    steps_.emplace_hint(it, x, y);
  }

 private:
  double ref_x_, ref_y_;
  double area_ = 0;
  std::map<double, double> steps_;
};

double Hypervolume3D(std::vector<Point> pts, absl::Span<const double> ref) {
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a[2] < b[2]; });
  Staircase stairs(ref[0], ref[1]);
  double volume = 0;
  for (size_t i = 0; i < pts.size(); ++i) {
    stairs.Insert(pts[i][0], pts[i][1]);
    double next_z = i + 1 < pts.size() ? pts[i + 1][2] : ref[2];
    volume += stairs.area() * (next_z - pts[i][2]);
  }
  return volume;
}

// pts: non-empty, every point strictly inside the reference box.
double HypervolumeInBox(std::vector<Point> pts, absl::Span<const double> ref);

// WFG (While et al. 2012) with the points sorted worst-first in the last objective: the part
// of point k's box not covered by the later (better in that objective) points is a slab over
// the full remaining last-objective range, so each exclusive volume is a (d-1)-dimensional
// hypervolume of the non-dominated limit set times that range.
double HypervolumeWfg(std::vector<Point> pts, absl::Span<const double> ref) {
  const size_t dims = ref.size();
  std::sort(pts.begin(), pts.end(),
            [&](const Point& a, const Point& b) { return a[dims - 1] > b[dims - 1]; });
  absl::Span<const double> sub_ref = ref.subspan(0, dims - 1);
  double volume = 0;
  for (size_t k = 0; k < pts.size(); ++k) {
    Point head(pts[k].begin(), pts[k].end() - 1);
    std::vector<Point> limit;
    limit.reserve(pts.size() - k - 1);
    for (size_t j = k + 1; j < pts.size(); ++j) {
      Point w(dims - 1);
      for (size_t d = 0; d + 1 < dims; ++d) w[d] = std::max(pts[k][d], pts[j][d]);
      limit.push_back(std::move(w));
    }
    double covered = limit.empty() ? 0 : HypervolumeInBox(NonDominatedUnique(limit), sub_ref);
    volume += (BoxVolume(head, sub_ref) - covered) * (ref[dims - 1] - pts[k][dims - 1]);
  }
  return volume;
}

double HypervolumeInBox(std::vector<Point> pts, absl::Span<const double> ref) {
  switch (ref.size()) {
    case 1: {
      double best = ref[0];
      for (const Point& p : pts) best = std::min(best, p[0]);
      return ref[0] - best;
    }
    case 2:
      return Hypervolume2D(std::move(pts), ref);
    case 3:
      return Hypervolume3D(std::move(pts), ref);
    default:
      return HypervolumeWfg(std::move(pts), ref);
  }
}

bool InsideBox(const Point& p, absl::Span<const double> reference) {
  for (size_t d = 0; d < reference.size(); ++d) {
    if (!(p[d] < reference[d])) return false;
  }
  return true;
}

// 2-D contributions. Front point i (x ascending) alone covers the rectangle between its
// neighbours, except where dominated points reach into it; a dominated point reaches into
// the rectangle of at most one front point (the only one dominating it that can), so each is
// clipped against one rectangle and the whole is O(n log n).
std::vector<double> Contributions2D(const std::vector<Point>& points, const std::vector<int>& front,
                                    const std::vector<int>& dominated,
                                    absl::Span<const double> ref) {
  // front is in lexicographic order: x ascending, y descending, duplicates adjacent.
  std::vector<int> steps;
  std::vector<bool> repeated;
  for (int i : front) {
    if (!steps.empty() && points[steps.back()] == points[i]) {
      repeated.back() = true;
    } else {
      steps.push_back(i);
      repeated.push_back(false);
    }
  }
  const size_t m = steps.size();
  auto right = [&](size_t k) { return k + 1 < m ? points[steps[k + 1]][0] : ref[0]; };
  auto top = [&](size_t k) { return k > 0 ? points[steps[k - 1]][1] : ref[1]; };
  std::vector<std::vector<Point>> reaching(m);
  for (int q : dominated) {
    auto it = std::upper_bound(steps.begin(), steps.end(), points[q][0],
                               [&](double x, int s) { return x < points[s][0]; });
    if (it == steps.begin()) continue;
    size_t k = static_cast<size_t>(it - steps.begin()) - 1;
    if (points[q][1] < top(k) && points[q][1] >= points[steps[k]][1]) {
      reaching[k].push_back({points[q][0], points[q][1]});
    }
  }
  std::vector<double> out(points.size(), 0.0);
  for (size_t k = 0; k < m; ++k) {
    if (repeated[k]) continue;
    const Point& p = points[steps[k]];
    double window[2] = {right(k), top(k)};
    double covered = reaching[k].empty() ? 0 : Hypervolume2D(reaching[k], window);
    out[steps[k]] = (window[0] - p[0]) * (window[1] - p[1]) - covered;
  }
  return out;
}

}  // namespace

bool Dominates(absl::Span<const double> a, absl::Span<const double> b) {
  bool better = false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] > b[i]) return false;
    if (a[i] < b[i]) better = true;
  }
  return better;
}

bool ConstrainedDominates(absl::Span<const double> a, double violation_a,
                          absl::Span<const double> b, double violation_b) {
  bool fa = Feasible(violation_a), fb = Feasible(violation_b);
  if (fa && fb) return Dominates(a, b);
  if (fa != fb) return fa;
  return violation_a < violation_b;
}

std::vector<int> NonDominatedRanks(const std::vector<std::vector<double>>& points,
                                   absl::Span<const double> violations) {
  const int n = static_cast<int>(points.size());
  std::vector<int> ranks(n, 0);
  std::vector<int> feasible, infeasible;
  for (int i = 0; i < n; ++i) {
    if (violations.empty() || Feasible(violations[i])) {
      feasible.push_back(i);
    } else {
      infeasible.push_back(i);
    }
  }
  int next = SortFronts(points, feasible, 0, ranks);
  // Infeasible points dominate one another by total violation alone.
  std::sort(infeasible.begin(), infeasible.end(),
            [&](int a, int b) { return violations[a] < violations[b]; });
  for (size_t k = 0; k < infeasible.size(); ++k) {
    if (k > 0 && violations[infeasible[k - 1]] < violations[infeasible[k]]) ++next;
    ranks[infeasible[k]] = next;
  }
  return ranks;
}

std::vector<int> ParetoFront(const std::vector<std::vector<double>>& points) {
  std::vector<int> ranks = NonDominatedRanks(points);
  std::vector<int> front;
  for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
    if (ranks[i] == 0) front.push_back(i);
  }
  return front;
}

std::vector<double> CrowdingDistances(const std::vector<std::vector<double>>& points,
                                      absl::Span<const int> members) {
  const size_t n = members.size();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> distance(n, n <= 2 ? inf : 0.0);
  if (n <= 2) return distance;
  std::vector<size_t> order(n);
  for (size_t m = 0; m < points[members[0]].size(); ++m) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return points[members[a]][m] < points[members[b]][m];
    });
    double lo = points[members[order.front()]][m];
    double range = points[members[order.back()]][m] - lo;
    distance[order.front()] = inf;
    distance[order.back()] = inf;
    if (!(range > 0)) continue;
    for (size_t k = 1; k + 1 < n; ++k) {
      double gap = points[members[order[k + 1]]][m] - points[members[order[k - 1]]][m];
      distance[order[k]] += gap / range;
    }
  }
  return distance;
}

double Hypervolume(const std::vector<std::vector<double>>& points,
                   absl::Span<const double> reference) {
  std::vector<Point> inside;
  for (const Point& p : points) {
    if (InsideBox(p, reference)) inside.push_back(p);
  }
  if (inside.empty()) return 0;
  if (reference.size() >= 4) inside = NonDominatedUnique(std::move(inside));
  return HypervolumeInBox(std::move(inside), reference);
}

std::vector<double> HypervolumeContributions(const std::vector<std::vector<double>>& points,
                                             absl::Span<const double> reference) {
  const int n = static_cast<int>(points.size());
  std::vector<int> inside;
  for (int i = 0; i < n; ++i) {
    if (InsideBox(points[i], reference)) inside.push_back(i);
  }
  std::vector<int> ranks(n, -1);
  SortFronts(points, inside, 0, ranks);
  std::vector<int> front, dominated;
  for (int i : LexOrder(points, inside)) (ranks[i] == 0 ? front : dominated).push_back(i);
  if (reference.size() == 2) return Contributions2D(points, front, dominated, reference);
  // Exclusive volume = own box - the hypervolume of every other point clipped to that box
  // (dominated points too: they cover what the point alone covered among the front).
  std::vector<double> out(n, 0.0);
  for (int i : front) {
    const Point& p = points[i];
    std::vector<Point> limit;
    bool duplicated = false;
    for (size_t j = 0; j < inside.size() && !duplicated; ++j) {
      if (inside[j] == i) continue;
      const Point& q = points[inside[j]];
      duplicated = q == p;
      Point w(p.size());
      for (size_t d = 0; d < p.size(); ++d) w[d] = std::max(p[d], q[d]);
      limit.push_back(std::move(w));
    }
    if (duplicated) continue;
    out[i] = BoxVolume(p, reference) - Hypervolume(limit, reference);
  }
  return out;
}

}  // namespace sextant
