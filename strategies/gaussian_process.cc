#include "strategies/gaussian_process.h"

#include <nlopt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "strategies/internal/splitmix.h"

namespace sextant {
namespace {

constexpr double kSqrt5 = 2.23606797749978969641;

// k(r) / signal_variance.
double MaternShape(double r) {
  return (1 + kSqrt5 * r + (5.0 / 3.0) * r * r) * std::exp(-kSqrt5 * r);
}

// -(dk/dr) / (r · signal_variance): finite at r = 0, and the factor that turns squared
// scaled differences into lengthscale and input gradients.
double MaternSlope(double r) { return (5.0 / 3.0) * (1 + kSqrt5 * r) * std::exp(-kSqrt5 * r); }

absl::Status Validate(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                      const GpHyperparameters& h) {
  if (x.rows() == 0 || x.rows() != y.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GP needs matching non-empty x and y, got ", x.rows(), " and ", y.size()));
  }
  if (h.lengthscales.size() != x.cols()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GP has ", h.lengthscales.size(), " lengthscales for ", x.cols(), " inputs"));
  }
  if (!x.allFinite() || !y.allFinite()) {
    return absl::InvalidArgumentError("GP inputs must be finite");
  }
  if (!(h.lengthscales.array() > 0).all() || !(h.signal_variance > 0) || !(h.noise_variance >= 0) ||
      !h.lengthscales.allFinite() || !std::isfinite(h.signal_variance) ||
      !std::isfinite(h.noise_variance)) {
    return absl::InvalidArgumentError("GP hyperparameters must be finite and positive");
  }
  return absl::OkStatus();
}

// x transposed (one column per point, so that a point's coordinates are contiguous), each
// dimension divided by its lengthscale.
Eigen::MatrixXd ScaledTranspose(const Eigen::MatrixXd& x, const Eigen::VectorXd& lengthscales) {
  return lengthscales.cwiseInverse().asDiagonal() * x.transpose();
}

double SquaredDistance(const double* a, const double* b, Eigen::Index d) {
  double sum = 0;
  for (Eigen::Index j = 0; j < d; ++j) sum += (a[j] - b[j]) * (a[j] - b[j]);
  return sum;
}

// Writes k(point a, point b) into k. Differences are taken coordinate by coordinate rather
// than through |a|² + |b|² - 2a·b, which loses the small distances that the variance near data
// depends on.
void FillKernelMatrix(const Eigen::MatrixXd& scaled_t, double signal_variance, Eigen::MatrixXd& k) {
  const Eigen::Index n = scaled_t.cols();
  const Eigen::Index d = scaled_t.rows();
  k.resize(n, n);
  for (Eigen::Index b = 0; b < n; ++b) {
    k(b, b) = signal_variance;
    for (Eigen::Index a = b + 1; a < n; ++a) {
      const double r = std::sqrt(SquaredDistance(&scaled_t(0, a), &scaled_t(0, b), d));
      k(a, b) = k(b, a) = signal_variance * MaternShape(r);
    }
  }
}

// Factorises k + (noise + jitter)·I, escalating jitter from zero until the Cholesky
// factorisation succeeds with a finite factor. Adds noise + jitter to k's diagonal in place.
absl::StatusOr<double> FactorizeWithJitter(Eigen::MatrixXd& k, double noise, double signal,
                                           Eigen::LLT<Eigen::MatrixXd>& llt) {
  k.diagonal().array() += noise;
  double jitter = 0;
  for (double next = 1e-10 * signal; jitter <= 0.1 * signal; next *= 10) {
    llt.compute(k);
    if (llt.info() == Eigen::Success && llt.matrixLLT().diagonal().allFinite()) return jitter;
    k.diagonal().array() += next - jitter;
    jitter = next;
  }
  return absl::InternalError("GP covariance is not positive definite even with jitter");
}

// Buffers reused across likelihood evaluations: the optimiser calls it hundreds of times
// with the same sizes, and fresh n×n allocations each time cost more in page faults than
// the arithmetic.
struct LikelihoodWorkspace {
  Eigen::MatrixXd scaled_t;
  Eigen::MatrixXd k;
  Eigen::MatrixXd w;
  Eigen::LLT<Eigen::MatrixXd> llt;
  Eigen::VectorXd alpha;
};

absl::Status ComputeLogMarginalLikelihood(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                          const GpHyperparameters& h, LikelihoodWorkspace& ws,
                                          LogLikelihood& out) {
  SEXTANT_RETURN_IF_ERROR(Validate(x, y, h));
  const Eigen::Index n = x.rows();
  const Eigen::Index d = x.cols();
  ws.scaled_t.noalias() = h.lengthscales.cwiseInverse().asDiagonal() * x.transpose();
  FillKernelMatrix(ws.scaled_t, h.signal_variance, ws.k);
  SEXTANT_RETURN_IF_ERROR(
      FactorizeWithJitter(ws.k, h.noise_variance, h.signal_variance, ws.llt).status());
  ws.alpha = ws.llt.solve(y);
  out.value = -0.5 * y.dot(ws.alpha) - ws.llt.matrixLLT().diagonal().array().log().sum() -
              0.5 * static_cast<double>(n) * std::log(2 * std::numbers::pi);
  // d/dθ = tr(W · dK/dθ) / 2 with W = αα' - K⁻¹.
  ws.w.setIdentity(n, n);
  ws.llt.solveInPlace(ws.w);
  ws.w *= -1;
  ws.w.noalias() += ws.alpha * ws.alpha.transpose();
  out.gradient.setZero(d + 2);
  double signal_grad = 0;
  for (Eigen::Index b = 0; b < n; ++b) {
    signal_grad += 0.5 * ws.w(b, b) * h.signal_variance;
    for (Eigen::Index a = b + 1; a < n; ++a) {
      signal_grad += ws.w(a, b) * ws.k(a, b);
      // dK/dlog l_j = s²·MaternSlope(r)·(scaled difference in j)²; pairs (a,b) and (b,a)
      // together cancel the 1/2.
      const double* pa = &ws.scaled_t(0, a);
      const double* pb = &ws.scaled_t(0, b);
      const double r = std::sqrt(SquaredDistance(pa, pb, d));
      // s²·MaternSlope(r), from k(a, b) = s²·(1 + √5r + 5r²/3)·exp(-√5r) without a second exp.
      const double slope =
          ws.k(a, b) * (5.0 / 3.0) * (1 + kSqrt5 * r) / (1 + kSqrt5 * r + (5.0 / 3.0) * r * r);
      const double factor = ws.w(a, b) * slope;
      for (Eigen::Index j = 0; j < d; ++j)
        out.gradient[j] += factor * (pa[j] - pb[j]) * (pa[j] - pb[j]);
    }
  }
  out.gradient[d] = signal_grad;
  out.gradient[d + 1] = 0.5 * h.noise_variance * ws.w.trace();
  return absl::OkStatus();
}

}  // namespace

double Matern52(const Eigen::VectorXd& a, const Eigen::VectorXd& b, const GpHyperparameters& h) {
  const double r = (a - b).cwiseQuotient(h.lengthscales).norm();
  return h.signal_variance * MaternShape(r);
}

absl::StatusOr<GaussianProcess> GaussianProcess::Fit(Eigen::MatrixXd x, Eigen::VectorXd y,
                                                     GpHyperparameters h) {
  SEXTANT_RETURN_IF_ERROR(Validate(x, y, h));
  GaussianProcess gp;
  gp.scaled_t_ = ScaledTranspose(x, h.lengthscales);
  Eigen::MatrixXd k;
  FillKernelMatrix(gp.scaled_t_, h.signal_variance, k);
  SEXTANT_ASSIGN_OR_RETURN(gp.jitter_,
                           FactorizeWithJitter(k, h.noise_variance, h.signal_variance, gp.llt_));
  gp.alpha_ = gp.llt_.solve(y);
  gp.x_ = std::move(x);
  gp.y_ = std::move(y);
  gp.h_ = std::move(h);
  return gp;
}

GaussianProcess::Prediction GaussianProcess::Predict(const Eigen::MatrixXd& points) const {
  const Eigen::Index n = scaled_t_.cols();
  const Eigen::Index d = scaled_t_.rows();
  const Eigen::Index m = points.rows();
  const Eigen::MatrixXd query_t = ScaledTranspose(points, h_.lengthscales);
  Prediction out;
  out.mean.resize(m);
  out.variance.resize(m);
  // Blocks of queries keep the n × block cross-covariance in cache and its allocation small.
  constexpr Eigen::Index kBlock = 128;
  Eigen::MatrixXd cross(n, std::min(m, kBlock));  // k(training point, query point)
  for (Eigen::Index start = 0; start < m; start += kBlock) {
    const Eigen::Index count = std::min(kBlock, m - start);
    auto block = cross.leftCols(count);
    for (Eigen::Index q = 0; q < count; ++q) {
      for (Eigen::Index i = 0; i < n; ++i) {
        const double r = std::sqrt(SquaredDistance(&scaled_t_(0, i), &query_t(0, start + q), d));
        block(i, q) = h_.signal_variance * MaternShape(r);
      }
    }
    out.mean.segment(start, count).noalias() = block.transpose() * alpha_;
    llt_.matrixL().solveInPlace(block);
    out.variance.segment(start, count) =
        (h_.signal_variance - block.colwise().squaredNorm().transpose().array()).cwiseMax(0);
  }
  return out;
}

GaussianProcess::PointPrediction GaussianProcess::PredictWithGradient(
    const Eigen::VectorXd& point) const {
  const Eigen::Index n = scaled_t_.cols();
  const Eigen::Index d = scaled_t_.rows();
  const Eigen::VectorXd inv_l = h_.lengthscales.cwiseInverse();
  const Eigen::VectorXd scaled = point.cwiseProduct(inv_l);
  Eigen::VectorXd k(n);
  // Column i: d k_i / d point = -s²·MaternSlope(r)·(scaled - scaled_i) / l.
  Eigen::MatrixXd dk(d, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double r = std::sqrt(SquaredDistance(&scaled_t_(0, i), scaled.data(), d));
    k[i] = h_.signal_variance * MaternShape(r);
    dk.col(i) =
        (-h_.signal_variance * MaternSlope(r)) * (scaled - scaled_t_.col(i)).cwiseProduct(inv_l);
  }
  PointPrediction out;
  out.mean = k.dot(alpha_);
  out.d_mean = dk * alpha_;
  const Eigen::VectorXd v = llt_.matrixL().solve(k);
  out.variance = std::max(0.0, h_.signal_variance - v.squaredNorm());
  const Eigen::VectorXd k_inv_k = llt_.matrixU().solve(v);
  out.d_variance = -2 * (dk * k_inv_k);
  return out;
}

absl::StatusOr<GaussianProcess> GaussianProcess::WithFantasies(
    const Eigen::MatrixXd& points) const {
  if (points.rows() == 0) return *this;
  const Prediction fantasy = Predict(points);
  Eigen::MatrixXd x(x_.rows() + points.rows(), x_.cols());
  x << x_, points;
  Eigen::VectorXd y(y_.size() + points.rows());
  y << y_, fantasy.mean;
  return Fit(std::move(x), std::move(y), h_);
}

GpPrior DefaultGpPrior(int dimension) {
  GpPrior prior;
  // Median lengthscale 0.5 of the unit cube up to 6 inputs, growing like sqrt(dimension)
  // beyond (the scaling of Hvarfner et al. 2024, which keeps the expected complexity of the
  // function constant), with a factor e spread either way. Hvarfner et al.'s own prior
  // (median e^√2·sqrt(d), about 9 at d = 5) let single early lucky points convince the fit
  // that a whole dimension was irrelevant: on Ackley-5 searches then never moved along it.
  prior.lengthscale_mean = std::log(0.5) + 0.5 * std::log(std::max(1.0, dimension / 6.0));
  prior.lengthscale_sd = 1;
  return prior;
}

absl::StatusOr<LogLikelihood> LogMarginalLikelihood(const Eigen::MatrixXd& x,
                                                    const Eigen::VectorXd& y,
                                                    const GpHyperparameters& h) {
  LikelihoodWorkspace ws;
  LogLikelihood out;
  SEXTANT_RETURN_IF_ERROR(ComputeLogMarginalLikelihood(x, y, h, ws, out));
  return out;
}

namespace {

// The optimiser's view: θ = [log l_1 .. log l_d, log s², log σ²], minimising
// -(log likelihood + log prior), and remembering the best point it has evaluated, since
// L-BFGS can end on a roundoff error after having found a good point.
struct MapObjective {
  const Eigen::MatrixXd* x;
  const Eigen::VectorXd* y;
  const GpPrior* prior;
  const std::vector<int>* tie;  // input -> lengthscale group (see GpFitOptions::tie)
  LikelihoodWorkspace workspace;
  LogLikelihood likelihood;
  double best_value = std::numeric_limits<double>::infinity();
  std::vector<double> best_theta;
};

GpHyperparameters FromTheta(const double* theta, Eigen::Index d) {
  GpHyperparameters h;
  h.lengthscales = Eigen::Map<const Eigen::VectorXd>(theta, d).array().exp();
  h.signal_variance = std::exp(theta[d]);
  h.noise_variance = std::exp(theta[d + 1]);
  return h;
}

// Adds -log N(t; mean, sd²) (less its constant) and its derivative.
double GaussianPenalty(double t, double mean, double sd, double* grad) {
  const double z = (t - mean) / sd;
  if (grad != nullptr) *grad += z / sd;
  return 0.5 * z * z;
}

// theta over lengthscale groups, expanded to one entry per input.
std::vector<double> Untie(const double* theta, unsigned count, const std::vector<int>& tie) {
  const auto groups = count - 2;
  std::vector<double> full;
  for (int g : tie) full.push_back(theta[g]);
  full.push_back(theta[groups]);
  full.push_back(theta[groups + 1]);
  return full;
}

double NegativeLogPosterior(unsigned count, const double* theta, double* grad, void* data) {
  auto* objective = static_cast<MapObjective*>(data);
  const Eigen::Index d = static_cast<Eigen::Index>(count) - 2;  // lengthscale groups
  const std::vector<int>& tie = *objective->tie;
  const std::vector<double> full = Untie(theta, count, tie);
  LogLikelihood* ll = &objective->likelihood;
  const absl::Status status = ComputeLogMarginalLikelihood(
      *objective->x, *objective->y, FromTheta(full.data(), objective->x->cols()),
      objective->workspace, *ll);
  if (!status.ok() || !std::isfinite(ll->value) || !ll->gradient.allFinite()) {
    if (grad != nullptr) std::fill(grad, grad + count, 0.0);
    return 1e300;  // steers the line search back without poisoning it with inf or NaN
  }
  if (grad != nullptr) {
    std::fill(grad, grad + count, 0.0);
    for (size_t j = 0; j < tie.size(); ++j) grad[tie[j]] -= ll->gradient[j];
    grad[d] = -ll->gradient[ll->gradient.size() - 2];
    grad[d + 1] = -ll->gradient[ll->gradient.size() - 1];
  }
  const GpPrior& p = *objective->prior;
  double value = -ll->value;
  for (Eigen::Index j = 0; j < d; ++j) {
    value += GaussianPenalty(theta[j], p.lengthscale_mean, p.lengthscale_sd,
                             grad == nullptr ? nullptr : &grad[j]);
  }
  value +=
      GaussianPenalty(theta[d], p.signal_mean, p.signal_sd, grad == nullptr ? nullptr : &grad[d]);
  value += GaussianPenalty(theta[d + 1], p.noise_mean, p.noise_sd,
                           grad == nullptr ? nullptr : &grad[d + 1]);
  if (value < objective->best_value) {
    objective->best_value = value;
    objective->best_theta.assign(theta, theta + count);
  }
  return value;
}

struct ThetaBounds {
  std::vector<double> lower;
  std::vector<double> upper;
};

ThetaBounds BoundsOf(const GpPrior& p, Eigen::Index d) {
  ThetaBounds b;
  b.lower.assign(d, std::log(p.lengthscale_min));
  b.upper.assign(d, std::log(p.lengthscale_max));
  b.lower.push_back(std::log(p.signal_min));
  b.upper.push_back(std::log(p.signal_max));
  b.lower.push_back(std::log(p.noise_min));
  b.upper.push_back(std::log(p.noise_max));
  return b;
}

// h's θ over lengthscale groups: a group's log lengthscale is its inputs' mean.
std::vector<double> ThetaOf(const GpHyperparameters& h, const std::vector<int>& tie, int groups) {
  std::vector<double> theta(groups, 0.0), members(groups, 0.0);
  for (size_t j = 0; j < tie.size(); ++j) {
    theta[tie[j]] += std::log(h.lengthscales[static_cast<Eigen::Index>(j)]);
    members[tie[j]] += 1;
  }
  for (int g = 0; g < groups; ++g) theta[g] /= std::max(1.0, members[g]);
  theta.push_back(std::log(h.signal_variance));
  theta.push_back(std::log(h.noise_variance));
  return theta;
}

// The prior's medians, and `random` draws from it, each clamped into the bounds.
std::vector<std::vector<double>> PriorStarts(const GpPrior& p, Eigen::Index d, int random,
                                             uint64_t seed) {
  std::vector<std::vector<double>> starts;
  std::vector<double> median(d, p.lengthscale_mean);
  median.push_back(p.signal_mean);
  median.push_back(p.noise_mean);
  starts.push_back(median);
  std::mt19937_64 engine(internal::StreamSeed(seed, 0x6770));
  for (int s = 0; s < random; ++s) {
    std::vector<double> theta;
    // Box–Muller on our own uniform draws: std::normal_distribution differs across
    // standard libraries, and fits must be reproducible.
    const auto normal = [&engine] {
      const double u1 = 1 - internal::UnitFromBits(engine());
      const double u2 = internal::UnitFromBits(engine());
      return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
    };
    for (Eigen::Index j = 0; j < d; ++j) {
      theta.push_back(p.lengthscale_mean + p.lengthscale_sd * normal());
    }
    theta.push_back(p.signal_mean + p.signal_sd * normal());
    theta.push_back(p.noise_mean + p.noise_sd * normal());
    starts.push_back(std::move(theta));
  }
  return starts;
}

void RunLbfgs(MapObjective& objective, const ThetaBounds& bounds, std::vector<double> theta,
              int max_evaluations) {
  const auto count = static_cast<unsigned>(theta.size());
  for (unsigned i = 0; i < count; ++i) {
    theta[i] = std::clamp(theta[i], bounds.lower[i], bounds.upper[i]);
  }
  nlopt_opt opt = nlopt_create(NLOPT_LD_LBFGS, count);
  if (opt == nullptr) return;
  nlopt_set_lower_bounds(opt, bounds.lower.data());
  nlopt_set_upper_bounds(opt, bounds.upper.data());
  nlopt_set_min_objective(opt, &NegativeLogPosterior, &objective);
  nlopt_set_maxeval(opt, max_evaluations);
  nlopt_set_ftol_rel(opt, 1e-7);
  nlopt_set_xtol_rel(opt, 1e-5);
  double value = 0;
  // Failure codes only mean that this start ended early; the best point seen is kept.
  nlopt_optimize(opt, theta.data(), &value);
  nlopt_destroy(opt);
}

}  // namespace

absl::StatusOr<GpHyperparameters> FitGpHyperparameters(const Eigen::MatrixXd& x,
                                                       const Eigen::VectorXd& y,
                                                       const GpFitOptions& options) {
  const Eigen::Index d = x.cols();
  GpHyperparameters probe;
  probe.lengthscales = Eigen::VectorXd::Ones(d);
  SEXTANT_RETURN_IF_ERROR(Validate(x, y, probe));
  std::vector<int> tie = options.tie;
  if (tie.empty()) {
    for (Eigen::Index j = 0; j < d; ++j) tie.push_back(static_cast<int>(j));
  }
  if (static_cast<Eigen::Index>(tie.size()) != d) {
    return absl::InvalidArgumentError(
        absl::StrCat("GP fit has ", tie.size(), " lengthscale groups for ", d, " inputs"));
  }
  const int groups = tie.empty() ? 0 : *std::max_element(tie.begin(), tie.end()) + 1;
  for (int g : tie) {
    if (g < 0) return absl::InvalidArgumentError("GP fit: negative lengthscale group");
  }
  const GpPrior prior = options.prior.value_or(DefaultGpPrior(static_cast<int>(d)));
  const ThetaBounds bounds = BoundsOf(prior, groups);
  MapObjective objective{&x, &y, &prior, &tie, {}, {}, std::numeric_limits<double>::infinity(),
                         {}};
  int starts = std::max(1, options.starts);
  if (options.warm_start.has_value() && options.warm_start->lengthscales.size() == d) {
    RunLbfgs(objective, bounds, ThetaOf(*options.warm_start, tie, groups),
             options.max_evaluations);
    --starts;
  }
  if (starts > 0) {
    for (std::vector<double>& start : PriorStarts(prior, groups, starts - 1, options.seed)) {
      RunLbfgs(objective, bounds, std::move(start), options.max_evaluations);
    }
  }
  if (objective.best_theta.empty() || objective.best_value >= 1e300) {
    return absl::InternalError("GP hyperparameter fit found no finite marginal likelihood");
  }
  const std::vector<double> full =
      Untie(objective.best_theta.data(), static_cast<unsigned>(objective.best_theta.size()), tie);
  return FromTheta(full.data(), d);
}

}  // namespace sextant
