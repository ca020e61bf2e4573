#include "strategies/internal/parzen_estimator.h"

#include <algorithm>
#include <boost/math/special_functions/erf.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <variant>

#include "strategies/internal/domain.h"
#include "strategies/internal/splitmix.h"

namespace sextant::internal {
namespace {

constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kHalfLogTwoPi = 0.91893853320467274178;
constexpr double kPriorWeight = 1.0;

double NormalCdf(double z) { return 0.5 * std::erfc(-z * kSqrtHalf); }

// log(Phi(b) - Phi(a)) for a <= b, computed on the side of zero where the tails do not
// cancel, so that intervals deep in one tail keep their (tiny) mass until it underflows.
double LogGaussMass(double a, double b) {
  if (a >= 0) return std::log(0.5 * (std::erfc(a * kSqrtHalf) - std::erfc(b * kSqrtHalf)));
  if (b <= 0) return std::log(0.5 * (std::erfc(-b * kSqrtHalf) - std::erfc(-a * kSqrtHalf)));
  return std::log1p(-0.5 * std::erfc(-a * kSqrtHalf) - 0.5 * std::erfc(b * kSqrtHalf));
}

// The inverse of NormalCdf for p in (0, 1).
double NormalQuantile(double p) {
  p = std::clamp(p, std::numeric_limits<double>::min(), 1.0 - 0x1.0p-53);
  return -boost::math::erfc_inv(2.0 * p) / kSqrtHalf;
}

// Ints and stepped floats take separate values, each owning a slice of the unit interval.
bool IsDiscrete(const ParamSpec& spec) {
  return spec.kind == ParamSpec::Kind::kInt || LevelsOf(spec).has_value();
}

// The slice [lo, hi] of the unit interval that decodes to the same value as x.
std::pair<double, double> IntSlice(const ParamSpec& spec, double x) {
  if (std::optional<Levels> levels = LevelsOf(spec)) {
    const auto count = static_cast<double>(levels->count);
    const double k = std::clamp(std::floor(x * count), 0.0, count - 1);
    return {k / count, (k + 1) / count};
  }
  const IntRange range = IntRangeOf(spec);
  const int64_t k = std::get<int64_t>(FromUnit(spec, x));
  const double lo = std::log(static_cast<double>(range.lo) - 0.5);
  const double span = std::log(static_cast<double>(range.hi) + 0.5) - lo;
  return {(std::log(static_cast<double>(k) - 0.5) - lo) / span,
          (std::log(static_cast<double>(k) + 0.5) - lo) / span};
}

// The bandwidth floor: Optuna's "magic clip", 1/min(100, kernels + 1) of the range.
double MinSigma(int kernels) { return 1.0 / std::min(100.0, 1.0 + kernels); }

// Univariate bandwidths: each centre's larger gap to its neighbours, with the domain's ends
// as neighbours except for the outermost centres (Optuna's consider_endpoints=False).
Eigen::ArrayXd NeighbourSigmas(const Eigen::ArrayXd& mu) {
  const Eigen::Index m = mu.size();
  std::vector<Eigen::Index> order(m);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](Eigen::Index a, Eigen::Index b) { return mu[a] < mu[b]; });
  std::vector<double> s(m + 2);
  s[0] = 0;
  s[m + 1] = 1;
  for (Eigen::Index i = 0; i < m; ++i) s[i + 1] = mu[order[i]];
  Eigen::ArrayXd sigma(m);
  for (Eigen::Index i = 0; i < m; ++i) {
    double gap = std::max(s[i + 1] - s[i], s[i + 2] - s[i + 1]);
    if (m >= 2 && i == 0) gap = s[2] - s[1];
    if (m >= 2 && i == m - 1) gap = s[m] - s[m - 1];
    sigma[order[i]] = gap;
  }
  return sigma;
}

}  // namespace

std::optional<double> EncodeForParzen(const ParamSpec& spec, const ParamValue& value) {
  switch (spec.kind) {
    case ParamSpec::Kind::kFloat: {
      const auto* x = std::get_if<double>(&value);
      if (x == nullptr || std::isnan(*x)) return std::nullopt;
      return ToUnit(spec, value);
    }
    case ParamSpec::Kind::kInt:
      if (!std::holds_alternative<int64_t>(value)) return std::nullopt;
      return ToUnit(spec, value);
    case ParamSpec::Kind::kCategorical: {
      const auto* s = std::get_if<std::string>(&value);
      if (s == nullptr) return std::nullopt;
      const auto it = std::find(spec.values.begin(), spec.values.end(), *s);
      if (it == spec.values.end()) return std::nullopt;
      return static_cast<double>(it - spec.values.begin());
    }
  }
  return std::nullopt;
}

ParamValue DecodeFromParzen(const ParamSpec& spec, double x) {
  if (spec.kind != ParamSpec::Kind::kCategorical) return FromUnit(spec, x);
  if (spec.values.empty()) return std::string();
  const double last = static_cast<double>(spec.values.size() - 1);
  const double i = std::isnan(x) ? 0.0 : std::clamp(std::round(x), 0.0, last);
  return spec.values[static_cast<size_t>(i)];
}

std::vector<double> ParzenObservationWeights(int n) {
  constexpr int kFlat = 25;
  std::vector<double> w(std::max(n, 0), 1.0);
  if (n <= kFlat) return w;
  // Optuna's linspace(1/n, 1, n - 25): ramps up to the flat tail of the newest 25.
  const int ramp = n - kFlat;
  const double first = 1.0 / n;
  for (int i = 0; i < ramp; ++i) {
    w[i] = ramp == 1 ? first : first + (1.0 - first) * i / (ramp - 1);
  }
  return w;
}

ParzenEstimator::ParzenEstimator(std::vector<const ParamSpec*> specs,
                                 const Eigen::MatrixXd& observations, std::vector<double> weights)
    : n_(static_cast<int>(observations.rows())), weights_(std::move(weights)) {
  if (weights_.empty()) weights_ = ParzenObservationWeights(n_);
  weights_.push_back(kPriorWeight);
  const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  for (double& w : weights_) w /= total;
  log_base_ = Eigen::Map<const Eigen::ArrayXd>(weights_.data(), n_ + 1).log();
  for (size_t d = 0; d < specs.size(); ++d) {
    const Eigen::VectorXd column = observations.col(static_cast<Eigen::Index>(d));
    dims_.push_back(specs[d]->kind == ParamSpec::Kind::kCategorical
                        ? CategoricalDimension(specs[d], column)
                        : NumericDimension(specs[d], column));
  }
}

ParzenEstimator::Dimension ParzenEstimator::NumericDimension(const ParamSpec* spec,
                                                             const Eigen::VectorXd& column) {
  const int kernels = n_ + 1;
  Dimension dim;
  dim.spec = spec;
  dim.mu.resize(kernels);
  dim.mu.head(n_) = column.array();
  dim.mu[n_] = 0.5;  // the prior kernel
  Eigen::ArrayXd sigma = NeighbourSigmas(dim.mu).max(MinSigma(kernels)).min(1.0);
  sigma[n_] = 1.0;
  dim.inv_sigma = sigma.inverse();
  for (int k = 0; k < kernels; ++k) {
    const double mass = LogGaussMass(-dim.mu[k] / sigma[k], (1 - dim.mu[k]) / sigma[k]);
    // No log(sigma) term: see the class comment.
    log_base_[k] -= IsDiscrete(*spec) ? mass : mass + kHalfLogTwoPi;
  }
  return dim;
}

ParzenEstimator::Dimension ParzenEstimator::CategoricalDimension(
    const ParamSpec* spec, const Eigen::VectorXd& column) const {
  Dimension dim;
  dim.spec = spec;
  dim.categories = std::max<int>(1, static_cast<int>(spec->values.size()));
  dim.observed.resize(n_ + 1);
  for (int i = 0; i < n_; ++i) {
    dim.observed[i] = std::clamp(static_cast<int>(column[i]), 0, dim.categories - 1);
  }
  dim.observed[n_] = -1;
  const double spread = kPriorWeight / (n_ + 1);
  dim.hit = (spread + 1) / (spread * dim.categories + 1);
  return dim;
}

Eigen::MatrixXd ParzenEstimator::Sample(std::mt19937_64& engine, int count) const {
  std::vector<double> cumulative(weights_.size());
  std::partial_sum(weights_.begin(), weights_.end(), cumulative.begin());
  Eigen::MatrixXd points(std::max(count, 0), static_cast<Eigen::Index>(dims_.size()));
  for (Eigen::Index c = 0; c < points.rows(); ++c) {
    const double u = UnitFromBits(engine()) * cumulative.back();
    const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
    const int kernel =
        std::min(static_cast<int>(it - cumulative.begin()), static_cast<int>(weights_.size()) - 1);
    for (size_t d = 0; d < dims_.size(); ++d) {
      points(c, static_cast<Eigen::Index>(d)) = SampleDimension(dims_[d], kernel, engine);
    }
  }
  return points;
}

double ParzenEstimator::SampleDimension(const Dimension& dim, int kernel,
                                        std::mt19937_64& engine) const {
  const double u = UnitFromBits(engine());
  if (dim.categories > 0) {
    const int observed = dim.observed[kernel];
    if (observed < 0) return std::min(std::floor(u * dim.categories), dim.categories - 1.0);
    // The observed category holds `hit`; the rest share 1 - hit evenly.
    const double miss = (1 - dim.hit) / std::max(1, dim.categories - 1);
    if (u < dim.hit || dim.categories == 1) return observed;
    const int other = std::min(static_cast<int>((u - dim.hit) / miss), dim.categories - 2);
    return other >= observed ? other + 1 : other;
  }
  const double mu = dim.mu[kernel];
  const double sigma = 1 / dim.inv_sigma[kernel];
  const double lo = NormalCdf(-mu / sigma);
  const double hi = NormalCdf((1 - mu) / sigma);
  const double x = std::clamp(mu + sigma * NormalQuantile(lo + u * (hi - lo)), 0.0, 1.0);
  return IsDiscrete(*dim.spec) ? ToUnit(*dim.spec, FromUnit(*dim.spec, x)) : x;
}

void ParzenEstimator::AddLogScores(const Dimension& dim, double x, Eigen::ArrayXd& scores) const {
  if (dim.categories > 0) {
    const double log_hit = std::log(dim.hit);
    const double log_miss = std::log((1 - dim.hit) / std::max(1, dim.categories - 1));
    const int category = static_cast<int>(x);
    for (int k = 0; k < n_; ++k) scores[k] += dim.observed[k] == category ? log_hit : log_miss;
    scores[n_] -= std::log(static_cast<double>(dim.categories));
    return;
  }
  if (IsDiscrete(*dim.spec)) {
    const auto [lo, hi] = IntSlice(*dim.spec, x);
    for (int k = 0; k <= n_; ++k) {
      scores[k] +=
          LogGaussMass((lo - dim.mu[k]) * dim.inv_sigma[k], (hi - dim.mu[k]) * dim.inv_sigma[k]);
    }
    return;
  }
  scores -= 0.5 * ((x - dim.mu) * dim.inv_sigma).square();
}

Eigen::VectorXd ParzenEstimator::LogPdf(const Eigen::MatrixXd& points) const {
  Eigen::ArrayXd scores(log_base_.size());
  Eigen::VectorXd out(points.rows());
  for (Eigen::Index c = 0; c < points.rows(); ++c) {
    scores = log_base_;
    for (size_t d = 0; d < dims_.size(); ++d) {
      AddLogScores(dims_[d], points(c, static_cast<Eigen::Index>(d)), scores);
    }
    const double top = scores.maxCoeff();
    if (!std::isfinite(top)) {
      out[c] = top;
      continue;
    }
    // Clamping keeps exp out of the subnormal range, where arithmetic is many times slower;
    // terms below e^-700 of the largest cannot change the sum anyway.
    out[c] = top + std::log((scores - top).max(-700.0).exp().sum());
  }
  return out;
}

}  // namespace sextant::internal
