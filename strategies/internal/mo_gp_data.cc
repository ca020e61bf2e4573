#include "strategies/internal/mo_gp_data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

namespace sextant::internal {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool Finished(const Observation& o) {
  return o.outcome == Observation::Outcome::kCompleted ||
         o.outcome == Observation::Outcome::kPruned;
}

// o's objective values when it reported every one of them finitely.
bool ValuesOf(const Observation& o, int objectives, std::vector<double>& out) {
  out.clear();
  if (!Finished(o)) return false;
  if (objectives == 1) {
    if (!o.value.has_value() || !std::isfinite(*o.value)) return false;
    out.push_back(*o.value);
    return true;
  }
  if (static_cast<int>(o.values.size()) != objectives) return false;
  for (double v : o.values) {
    if (!std::isfinite(v)) return false;
  }
  out = o.values;
  return true;
}

std::vector<double> ViolationsOf(const Observation& o, int constraints) {
  std::vector<double> out(static_cast<size_t>(constraints),
                          std::numeric_limits<double>::infinity());
  for (int j = 0; j < constraints && j < static_cast<int>(o.violations.size()); ++j) {
    if (!std::isnan(o.violations[j])) out[j] = o.violations[j];
  }
  return out;
}

// Replaces non-finite violations of each constraint by its largest finite one (see
// CollectOutputs).
void ClampMissingViolations(std::vector<std::vector<double>>& violations, int constraints) {
  for (int j = 0; j < constraints; ++j) {
    double largest = 0;
    bool positive = false;
    for (const std::vector<double>& v : violations) {
      if (std::isfinite(v[j]) && v[j] > 0) {
        largest = std::max(largest, v[j]);
        positive = true;
      }
    }
    const double missing = positive ? largest : 1.0;
    for (std::vector<double>& v : violations) {
      if (!std::isfinite(v[j])) v[j] = v[j] < 0 ? -missing : missing;
    }
  }
}

}  // namespace

OutputData CollectOutputs(const UnitEncoding& encoding, absl::Span<const Observation> history,
                          int objectives, int constraints) {
  OutputData data;
  std::vector<double> values;
  for (const Observation& o : history) {
    if (o.outcome == Observation::Outcome::kPending) {
      data.pending.push_back(encoding.Encode(o.params));
      continue;
    }
    Eigen::VectorXd z = encoding.Encode(o.params);
    if (o.cost.has_value() && std::isfinite(*o.cost) && *o.cost > 0) {
      data.cost_x.push_back(z);
      data.log_cost.push_back(std::log(*o.cost));
    }
    const bool valued = ValuesOf(o, objectives, values);
    std::vector<double> violations = ViolationsOf(o, constraints);
    data.feasible.push_back(valued && std::all_of(violations.begin(), violations.end(),
                                                  [](double v) { return v <= 0; }));
    data.x.push_back(std::move(z));
    data.y.push_back(values);
    data.violations.push_back(std::move(violations));
    data.valued.push_back(valued);
    data.valued_count += valued ? 1 : 0;
  }
  ClampMissingViolations(data.violations, constraints);
  if (data.valued_count == 0) return data;
  std::vector<double> worst(static_cast<size_t>(objectives),
                            -std::numeric_limits<double>::infinity());
  for (size_t i = 0; i < data.y.size(); ++i) {
    if (!data.valued[i]) continue;
    for (int k = 0; k < objectives; ++k) worst[k] = std::max(worst[k], data.y[i][k]);
  }
  for (size_t i = 0; i < data.y.size(); ++i) {
    if (!data.valued[i]) data.y[i] = worst;
  }
  return data;
}

std::vector<double> ImportanceKeys(const OutputData& data) {
  const size_t n = data.y.size();
  std::vector<double> key(n, std::numeric_limits<double>::infinity());
  if (n == 0 || data.y[0].empty()) return key;
  std::vector<size_t> order(n);
  for (size_t k = 0; k < data.y[0].size(); ++k) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&data, k](size_t a, size_t b) { return data.y[a][k] < data.y[b][k]; });
    for (size_t r = 0; r < n; ++r) key[order[r]] = std::min(key[order[r]], static_cast<double>(r));
  }
  for (size_t i = 0; i < n; ++i) key[i] += data.feasible[i] ? 0 : static_cast<double>(n);
  return key;
}

OutputData SelectRows(OutputData data, absl::Span<const size_t> keep) {
  OutputData out;
  for (size_t i : keep) {
    out.x.push_back(std::move(data.x[i]));
    out.y.push_back(std::move(data.y[i]));
    out.violations.push_back(std::move(data.violations[i]));
    out.valued.push_back(data.valued[i]);
    out.feasible.push_back(data.feasible[i]);
  }
  out.valued_count = data.valued_count;
  out.cost_x = std::move(data.cost_x);
  out.log_cost = std::move(data.log_cost);
  out.pending = std::move(data.pending);
  return out;
}

std::vector<double> ReferencePoint(const Eigen::MatrixXd& y) {
  std::vector<double> reference;
  for (Eigen::Index k = 0; k < y.cols(); ++k) {
    const double worst = y.col(k).maxCoeff();
    const double range = worst - y.col(k).minCoeff();
    reference.push_back(worst + (range > 0 ? 0.1 * range : 1.0));
  }
  return reference;
}

double WarpedValue(const Eigen::VectorXd& raw, const Eigen::VectorXd& warped, double v) {
  // Distinct raw values, ascending, with their warped images.
  std::vector<std::pair<double, double>> knots;
  for (Eigen::Index i = 0; i < raw.size(); ++i) knots.emplace_back(raw[i], warped[i]);
  std::sort(knots.begin(), knots.end());
  knots.erase(std::unique(knots.begin(), knots.end(),
                          [](const auto& a, const auto& b) { return a.first == b.first; }),
              knots.end());
  if (knots.empty()) return v;
  if (knots.size() == 1) return v - knots[0].first + knots[0].second;
  auto upper = std::lower_bound(knots.begin(), knots.end(), std::make_pair(v, -kInf));
  if (upper == knots.begin()) ++upper;
  if (upper == knots.end()) --upper;
  const auto& [x1, w1] = *upper;
  const auto& [x0, w0] = *(upper - 1);
  return w0 + (v - x0) * (w1 - w0) / (x1 - x0);
}

}  // namespace sextant::internal
