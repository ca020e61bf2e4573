#include "strategies/internal/output_transform.h"

#include <algorithm>
#include <boost/math/special_functions/erf.hpp>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <vector>

namespace sextant::internal {
namespace {

Eigen::VectorXd Standardize(const Eigen::VectorXd& t) {
  const double mean = t.mean();
  const double sd = std::sqrt((t.array() - mean).square().mean());
  if (!(sd > 1e-12 * std::max(1.0, std::abs(mean)))) return Eigen::VectorXd::Zero(t.size());
  return (t.array() - mean) / sd;
}

Eigen::VectorXd RankGaussian(const Eigen::VectorXd& y) {
  const Eigen::Index n = y.size();
  std::vector<Eigen::Index> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&y](auto a, auto b) { return y[a] < y[b]; });
  Eigen::VectorXd out(n);
  for (Eigen::Index i = 0; i < n;) {
    Eigen::Index j = i;
    while (j + 1 < n && y[order[j + 1]] == y[order[i]]) ++j;
    const double rank = 0.5 * static_cast<double>(i + j);  // ties share their mean rank
    const double p = (rank + 0.5) / static_cast<double>(n);
    const double score = -std::numbers::sqrt2 * boost::math::erfc_inv(2 * p);
    for (Eigen::Index k = i; k <= j; ++k) out[order[k]] = score;
    i = j + 1;
  }
  return out;
}

// y - min(y) + c with c > 0 the median's distance to the minimum: a smaller c stretches the
// few best values far below the rest, and a GP then sees the incumbent as an isolated spike
// and stops exploiting around it (measured on Branin and Ackley).
Eigen::VectorXd ShiftPositive(const Eigen::VectorXd& y) {
  const double lo = y.minCoeff();
  std::vector<double> sorted(y.data(), y.data() + y.size());
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  double c = sorted[sorted.size() / 2] - lo;
  if (!(c > 0)) c = y.maxCoeff() - lo;
  if (!(c > 0)) c = 1;
  return (y.array() - lo) + c;
}

Eigen::VectorXd BoxCox(const Eigen::VectorXd& positive, double lambda) {
  if (std::abs(lambda) < 1e-9) return positive.array().log();
  return (positive.array().pow(lambda) - 1) / lambda;
}

// Profile log likelihood of Box–Cox's λ under a normal model for the transformed values.
double BoxCoxLogLikelihood(const Eigen::VectorXd& positive, double lambda, double sum_log) {
  const Eigen::VectorXd t = BoxCox(positive, lambda);
  const double var = (t.array() - t.mean()).square().mean();
  if (!(var > 0) || !std::isfinite(var)) return -std::numeric_limits<double>::infinity();
  return -0.5 * static_cast<double>(t.size()) * std::log(var) + (lambda - 1) * sum_log;
}

Eigen::VectorXd BestBoxCox(const Eigen::VectorXd& y) {
  const Eigen::VectorXd positive = ShiftPositive(y);
  const double sum_log = positive.array().log().sum();
  double best_lambda = 1;
  double best = BoxCoxLogLikelihood(positive, 1, sum_log);
  for (int i = -20; i <= 40; ++i) {
    const double lambda = 0.05 * i;
    const double ll = BoxCoxLogLikelihood(positive, lambda, sum_log);
    if (ll > best) {
      best = ll;
      best_lambda = lambda;
    }
  }
  return BoxCox(positive, best_lambda);
}

// Values above the upper quartile are compressed logarithmically, with unit slope at the
// quartile and the scale of the better three quarters (quartile - min), so that a few huge
// values cannot flatten the good region, while the good region keeps its shape. The knee was
// at the median: once half the trials lay in Rosenbrock's valley, it crossed the valley's
// walls, whose quadratic rise then turned into a crease that the GP could follow only with
// short lengthscales, and it stopped extrapolating along the valley (bench/hpo).
Eigen::VectorXd TailLog(const Eigen::VectorXd& y) {
  std::vector<double> sorted(y.data(), y.data() + y.size());
  const size_t k = sorted.size() * 3 / 4;
  std::nth_element(sorted.begin(), sorted.begin() + k, sorted.end());
  const double knee = sorted[k];
  double scale = knee - y.minCoeff();
  if (!(scale > 0)) scale = y.maxCoeff() - knee;
  if (!(scale > 0)) return y;
  return y.unaryExpr([knee, scale](double v) {
    return v <= knee ? v : knee + scale * std::log1p((v - knee) / scale);
  });
}

}  // namespace

Eigen::VectorXd WarpAndStandardize(const Eigen::VectorXd& y, OutputWarp warp) {
  if (y.size() == 0) return y;
  switch (warp) {
    case OutputWarp::kNone:
      return Standardize(y);
    case OutputWarp::kRankGaussian:
      return Standardize(RankGaussian(y));
    case OutputWarp::kLog:
      return Standardize(ShiftPositive(y).array().log());
    case OutputWarp::kBoxCox:
      return Standardize(BestBoxCox(y));
    case OutputWarp::kTailLog:
      return Standardize(TailLog(y));
  }
  return Standardize(y);
}

}  // namespace sextant::internal
