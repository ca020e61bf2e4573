#include "strategies/internal/ehvi.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <utility>
#include <vector>

#include "strategies/acquisition.h"

namespace sextant::internal {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// log(1 - exp(a)) for a <= 0, choosing the form that does not cancel (Mächler 2012).
double Log1mExp(double a) {
  return a > -std::numbers::ln2 ? std::log(-std::expm1(a)) : std::log1p(-std::exp(a));
}

// True when a is no worse than b in each of the first `dims` objectives (a weakly dominates b
// there).
bool WeaklyDominates(const std::vector<double>& a, const std::vector<double>& b, int dims) {
  for (int k = 0; k < dims; ++k) {
    if (a[k] > b[k]) return false;
  }
  return true;
}

// The points whose first `dims` coordinates no other point weakly dominates; of equal ones
// the first is kept.
std::vector<std::vector<double>> NonDominated(std::vector<std::vector<double>> points, int dims) {
  std::vector<bool> dominated(points.size(), false);
  for (size_t i = 0; i < points.size(); ++i) {
    for (size_t j = 0; j < points.size() && !dominated[i]; ++j) {
      if (j == i || !WeaklyDominates(points[j], points[i], dims)) continue;
      // Of mutually weakly dominating (equal) points only the first stays.
      dominated[i] = !WeaklyDominates(points[i], points[j], dims) || j < i;
    }
  }
  std::vector<std::vector<double>> kept;
  for (size_t i = 0; i < points.size(); ++i) {
    if (!dominated[i]) kept.push_back(std::move(points[i]));
  }
  return kept;
}

}  // namespace

EhviBoxes::EhviBoxes(const std::vector<std::vector<double>>& front,
                     absl::Span<const double> reference) {
  const int dims = static_cast<int>(reference.size());
  std::vector<std::vector<double>> inside;
  for (const std::vector<double>& p : front) {
    bool below = static_cast<int>(p.size()) == dims;
    for (int k = 0; below && k < dims; ++k) below = p[k] < reference[k];
    if (below) inside.push_back(p);
  }
  inside = NonDominated(std::move(inside), dims);
  coordinates_.resize(dims);
  for (int k = 0; k < dims; ++k) {
    std::vector<double>& c = coordinates_[k];
    c.push_back(-kInf);
    for (const std::vector<double>& p : inside) c.push_back(p[k]);
    c.push_back(reference[k]);
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
  }
  std::vector<int> lower(dims), upper(dims);
  Decompose(std::move(inside), dims, lower, upper);
  IndexPairs();
}

int EhviBoxes::IndexOf(int objective, double value) const {
  const std::vector<double>& c = coordinates_[objective];
  return static_cast<int>(std::lower_bound(c.begin(), c.end(), value) - c.begin());
}

// The improving region of `points` in the first `dims` objectives, with the boxes' bounds in
// the objectives beyond already set in lower and upper: for z in the slice between the j-th
// and (j+1)-th smallest values of the last objective, exactly the j points below it can
// dominate z, so the slice's cross-section is the improving region of those j points in one
// objective fewer.
void EhviBoxes::Decompose(std::vector<std::vector<double>> points, int dims,
                          std::vector<int>& lower, std::vector<int>& upper) {
  const int last = dims - 1;
  if (dims > 1) points = NonDominated(std::move(points), dims);
  std::stable_sort(points.begin(), points.end(),
                   [last](const auto& a, const auto& b) { return a[last] < b[last]; });
  const int reference = static_cast<int>(coordinates_[last].size()) - 1;
  if (dims == 1) {
    lower[0] = 0;
    upper[0] = points.empty() ? reference : IndexOf(0, points[0][0]);
    for (int k = 0; k < objectives(); ++k) bounds_.push_back(lower[k]);
    for (int k = 0; k < objectives(); ++k) bounds_.push_back(upper[k]);
    return;
  }
  for (size_t j = 0; j <= points.size(); ++j) {
    const int lo = j == 0 ? 0 : IndexOf(last, points[j - 1][last]);
    const int hi = j == points.size() ? reference : IndexOf(last, points[j][last]);
    if (lo >= hi) continue;
    lower[last] = lo;
    upper[last] = hi;
    Decompose(std::vector<std::vector<double>>(points.begin(), points.begin() + j), last, lower,
              upper);
  }
}

void EhviBoxes::IndexPairs() {
  const int dims = objectives();
  pairs_.assign(dims, {});
  box_pairs_.resize(bounds_.size() / 2);
  for (int k = 0; k < dims; ++k) {
    std::map<std::pair<int, int>, int> index;
    for (int b = 0; b < boxes(); ++b) {
      const size_t base = static_cast<size_t>(2 * dims * b);
      const std::pair<int, int> pair(bounds_[base + k], bounds_[base + dims + k]);
      const auto [it, added] = index.emplace(pair, static_cast<int>(pairs_[k].size()));
      if (added) pairs_[k].push_back(pair);
      box_pairs_[static_cast<size_t>(dims * b + k)] = it->second;
    }
  }
}

double EhviBoxes::LogEhvi(absl::Span<const double> mean, absl::Span<const double> sd) const {
  const int dims = objectives();
  // Per objective and distinct (lower, upper) pair: log ∫_lower^upper Φ((z - mean)/sd) dz,
  // from log(sd·h((c - mean)/sd)) = log ∫_{-inf}^{c} at every coordinate c.
  std::vector<std::vector<double>> log_side(dims);
  std::vector<double> log_integral;
  for (int k = 0; k < dims; ++k) {
    const double s = std::max(sd[k], 1e-12);
    log_integral.clear();
    for (double c : coordinates_[k]) {
      log_integral.push_back(std::isinf(c) ? -kInf : LogH((c - mean[k]) / s) + std::log(s));
    }
    for (const auto& [lower, upper] : pairs_[k]) {
      const double hi = log_integral[upper];
      const double lo = log_integral[lower];
      log_side[k].push_back(lo == -kInf ? hi : (lo < hi ? hi + Log1mExp(lo - hi) : -kInf));
    }
  }
  // Fast path: each objective's sides scaled by their largest, multiplied out in linear
  // space; the slow path sums in log space when that underflows (deep in the dominated
  // region).
  double log_scale = 0;
  std::vector<std::vector<double>> scaled(dims);
  for (int k = 0; k < dims; ++k) {
    const double largest = *std::max_element(log_side[k].begin(), log_side[k].end());
    if (largest == -kInf) return -kInf;
    log_scale += largest;
    for (double v : log_side[k]) scaled[k].push_back(std::exp(v - largest));
  }
  double sum = 0;
  for (int b = 0; b < boxes(); ++b) {
    const int* pair = &box_pairs_[static_cast<size_t>(dims * b)];
    double product = scaled[0][pair[0]];
    for (int k = 1; k < dims; ++k) product *= scaled[k][pair[k]];
    sum += product;
  }
  if (sum > 1e-280) return log_scale + std::log(sum);
  return SlowLogSum(log_side);
}

double EhviBoxes::SlowLogSum(const std::vector<std::vector<double>>& log_side) const {
  const int dims = objectives();
  std::vector<double> log_box(boxes());
  double largest = -kInf;
  for (int b = 0; b < boxes(); ++b) {
    const int* pair = &box_pairs_[static_cast<size_t>(dims * b)];
    double value = 0;
    for (int k = 0; k < dims; ++k) value += log_side[k][pair[k]];
    log_box[b] = value;
    largest = std::max(largest, value);
  }
  if (largest == -kInf) return -kInf;
  double sum = 0;
  for (double v : log_box) sum += std::exp(v - largest);
  return largest + std::log(sum);
}

double EhviBoxes::Ehvi(absl::Span<const double> mean, absl::Span<const double> sd) const {
  return std::exp(LogEhvi(mean, sd));
}

}  // namespace sextant::internal
