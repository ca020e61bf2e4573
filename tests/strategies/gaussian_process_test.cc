#include "strategies/gaussian_process.h"

#include <Eigen/Dense>
#include <cmath>
#include <numbers>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace sextant {
namespace {

// The Matérn-5/2 kernel written out independently of the implementation.
double Kernel(const Eigen::VectorXd& a, const Eigen::VectorXd& b, const GpHyperparameters& h) {
  double r2 = 0;
  for (Eigen::Index j = 0; j < a.size(); ++j) {
    r2 += (a[j] - b[j]) * (a[j] - b[j]) / (h.lengthscales[j] * h.lengthscales[j]);
  }
  const double r = std::sqrt(r2);
  const double s5 = std::sqrt(5.0);
  return h.signal_variance * (1 + s5 * r + 5 * r2 / 3) * std::exp(-s5 * r);
}

GpHyperparameters Hyper(Eigen::VectorXd lengthscales, double signal, double noise) {
  GpHyperparameters h;
  h.lengthscales = std::move(lengthscales);
  h.signal_variance = signal;
  h.noise_variance = noise;
  return h;
}

// Closed-form posterior: mean = k*' K⁻¹ y, var = k** - k*' K⁻¹ k*, K including noise.
void ExpectClosedForm(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                      const GpHyperparameters& h, const Eigen::MatrixXd& queries) {
  const Eigen::Index n = x.rows();
  Eigen::MatrixXd k(n, n);
  for (Eigen::Index a = 0; a < n; ++a) {
    for (Eigen::Index b = 0; b < n; ++b) k(a, b) = Kernel(x.row(a), x.row(b), h);
  }
  k.diagonal().array() += h.noise_variance;
  const Eigen::MatrixXd k_inv = k.inverse();
  absl::StatusOr<GaussianProcess> gp = GaussianProcess::Fit(x, y, h);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_EQ(gp->jitter(), 0);
  const GaussianProcess::Prediction p = gp->Predict(queries);
  for (Eigen::Index q = 0; q < queries.rows(); ++q) {
    Eigen::VectorXd ks(n);
    for (Eigen::Index a = 0; a < n; ++a) ks[a] = Kernel(x.row(a), queries.row(q), h);
    const double mean = ks.dot(k_inv * y);
    const double var = h.signal_variance - ks.dot(k_inv * ks);
    EXPECT_NEAR(p.mean[q], mean, 1e-10) << q;
    EXPECT_NEAR(p.variance[q], var, 1e-10) << q;
    const GaussianProcess::PointPrediction one = gp->PredictWithGradient(queries.row(q));
    EXPECT_NEAR(one.mean, mean, 1e-10) << q;
    EXPECT_NEAR(one.variance, var, 1e-10) << q;
  }
}

TEST(GaussianProcessTest, OnePointPosteriorMatchesClosedForm) {
  Eigen::MatrixXd x(1, 1);
  x << 0.3;
  Eigen::VectorXd y(1);
  y << 1.2;
  const GpHyperparameters h = Hyper(Eigen::VectorXd::Constant(1, 0.5), 2.0, 0.01);
  // By hand: K = 2.01; at x* = 0.8, r = 1, k* = 2 (1 + √5 + 5/3) e^{-√5}.
  const double ks = 2 * (1 + std::sqrt(5.0) + 5.0 / 3) * std::exp(-std::sqrt(5.0));
  absl::StatusOr<GaussianProcess> gp = GaussianProcess::Fit(x, y, h);
  ASSERT_TRUE(gp.ok());
  Eigen::MatrixXd q(1, 1);
  q << 0.8;
  const GaussianProcess::Prediction p = gp->Predict(q);
  EXPECT_NEAR(p.mean[0], ks / 2.01 * 1.2, 1e-12);
  EXPECT_NEAR(p.variance[0], 2 - ks * ks / 2.01, 1e-12);
  ExpectClosedForm(x, y, h, q);
}

TEST(GaussianProcessTest, TwoAndThreePointPosteriorsMatchClosedForm) {
  Eigen::MatrixXd x2(2, 1);
  x2 << 0.1, 0.6;
  ExpectClosedForm(x2, Eigen::Vector2d(-0.4, 0.9),
                   Hyper(Eigen::VectorXd::Constant(1, 0.3), 1.5, 1e-4),
                   Eigen::Vector3d(0.0, 0.35, 0.95));
  Eigen::MatrixXd x3(3, 2);
  x3 << 0.1, 0.2, 0.7, 0.4, 0.5, 0.9;
  Eigen::MatrixXd q(4, 2);
  q << 0.1, 0.2, 0.3, 0.3, 0.9, 0.9, 0.0, 1.0;
  ExpectClosedForm(x3, Eigen::Vector3d(1.0, -0.5, 0.25),
                   Hyper(Eigen::Vector2d(0.4, 0.8), 0.7, 1e-3), q);
}

TEST(GaussianProcessTest, PointGradientsMatchFiniteDifferences) {
  Eigen::MatrixXd x(4, 3);
  x << 0.1, 0.2, 0.3, 0.8, 0.1, 0.5, 0.4, 0.9, 0.2, 0.6, 0.6, 0.9;
  const GpHyperparameters h = Hyper(Eigen::Vector3d(0.3, 0.5, 0.9), 1.3, 1e-4);
  absl::StatusOr<GaussianProcess> gp =
      GaussianProcess::Fit(x, Eigen::Vector4d(0.5, -1.0, 2.0, 0.1), h);
  ASSERT_TRUE(gp.ok());
  const Eigen::Vector3d at(0.45, 0.35, 0.55);
  const GaussianProcess::PointPrediction p = gp->PredictWithGradient(at);
  for (int j = 0; j < 3; ++j) {
    Eigen::Vector3d up = at, down = at;
    up[j] += 1e-6;
    down[j] -= 1e-6;
    const auto pu = gp->PredictWithGradient(up), pd = gp->PredictWithGradient(down);
    EXPECT_NEAR(p.d_mean[j], (pu.mean - pd.mean) / 2e-6, 1e-6) << j;
    EXPECT_NEAR(p.d_variance[j], (pu.variance - pd.variance) / 2e-6, 1e-6) << j;
  }
}

TEST(GaussianProcessTest, LogMarginalLikelihoodAndGradientMatchClosedForm) {
  Eigen::MatrixXd x(5, 2);
  x << 0.1, 0.9, 0.3, 0.2, 0.5, 0.5, 0.8, 0.7, 0.95, 0.05;
  Eigen::VectorXd y(5);
  y << 0.3, -1.1, 0.4, 1.6, -0.2;
  const GpHyperparameters h = Hyper(Eigen::Vector2d(0.35, 0.6), 1.4, 0.02);
  Eigen::MatrixXd k(5, 5);
  for (int a = 0; a < 5; ++a) {
    for (int b = 0; b < 5; ++b) k(a, b) = Kernel(x.row(a), x.row(b), h);
  }
  k.diagonal().array() += h.noise_variance;
  const double expected = -0.5 * y.dot(k.inverse() * y) - 0.5 * std::log(k.determinant()) -
                          2.5 * std::log(2 * std::numbers::pi);
  absl::StatusOr<LogLikelihood> ll = LogMarginalLikelihood(x, y, h);
  ASSERT_TRUE(ll.ok());
  EXPECT_NEAR(ll->value, expected, 1e-10);
  // Gradient with respect to [log l0, log l1, log s², log noise].
  for (int i = 0; i < 4; ++i) {
    GpHyperparameters up = h, down = h;
    const double e = 1e-6;
    auto scale = [i, e](GpHyperparameters& g, double sign) {
      const double f = std::exp(sign * e);
      if (i < 2) g.lengthscales[i] *= f;
      if (i == 2) g.signal_variance *= f;
      if (i == 3) g.noise_variance *= f;
    };
    scale(up, 1);
    scale(down, -1);
    const double numeric =
        (LogMarginalLikelihood(x, y, up)->value - LogMarginalLikelihood(x, y, down)->value) /
        (2 * e);
    EXPECT_NEAR(ll->gradient[i], numeric, 1e-6) << i;
  }
}

TEST(GaussianProcessTest, FitFindsTheIrrelevantDimension) {
  // y depends on the first coordinate only: its lengthscale should come out much shorter.
  const int n = 30;
  Eigen::MatrixXd x(n, 2);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(i, 0) = std::fmod(0.618034 * i, 1.0);
    x(i, 1) = std::fmod(0.754878 * i + 0.3, 1.0);
    y[i] = std::sin(6 * x(i, 0));
  }
  y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
  absl::StatusOr<GpHyperparameters> h = FitGpHyperparameters(x, y, GpFitOptions());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_LT(4 * h->lengthscales[0], h->lengthscales[1]);
  EXPECT_LT(h->noise_variance, 1e-2);
  // Deterministic: the same inputs give the same fit.
  absl::StatusOr<GpHyperparameters> again = FitGpHyperparameters(x, y, GpFitOptions());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(h->lengthscales, again->lengthscales);
}

TEST(GaussianProcessTest, TiedLengthscalesComeOutEqualAndOthersStayFree) {
  // Inputs 0 and 1 share a lengthscale (as a categorical's one-hot coordinates do); input 2,
  // on which y does not depend, keeps its own, long one.
  const int n = 30;
  Eigen::MatrixXd x(n, 3);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(i, 0) = std::fmod(0.618034 * i, 1.0);
    x(i, 1) = std::fmod(0.754878 * i + 0.3, 1.0);
    x(i, 2) = std::fmod(0.569840 * i + 0.1, 1.0);
    y[i] = std::sin(6 * x(i, 0)) + std::cos(5 * x(i, 1));
  }
  y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
  GpFitOptions options;
  options.tie = {0, 0, 1};
  absl::StatusOr<GpHyperparameters> h = FitGpHyperparameters(x, y, options);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->lengthscales[0], h->lengthscales[1]);
  EXPECT_LT(4 * h->lengthscales[0], h->lengthscales[2]);
  options.tie = {0, 1};
  EXPECT_EQ(FitGpHyperparameters(x, y, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GaussianProcessTest, DefaultNoiseFloorLetsANoiselessFitInterpolateTinyDifferences) {
  // A smooth noiseless function whose values near its minimum differ by less than 1e-3 of
  // their spread: the fit must be free to take the noise well below 1e-6, so that the
  // posterior mean still ranks those points as the data do.
  const int n = 40;
  Eigen::MatrixXd x(n, 1);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(i, 0) = i < 30 ? std::fmod(0.618034 * i, 1.0) : 0.3 + 0.001 * (i - 30);
    y[i] = 1000 * std::pow(x(i, 0) - 0.3, 2) + std::pow(x(i, 0) - 0.3, 4);
  }
  y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
  absl::StatusOr<GpHyperparameters> h = FitGpHyperparameters(x, y, GpFitOptions());
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_LT(h->noise_variance, 1e-8);
  absl::StatusOr<GaussianProcess> gp = GaussianProcess::Fit(x, y, *h);
  ASSERT_TRUE(gp.ok()) << gp.status();
  const Eigen::VectorXd mean = gp->Predict(x.bottomRows(10)).mean;
  for (int i = 1; i < 10; ++i) EXPECT_LT(mean[i - 1], mean[i]) << i;
}

TEST(GaussianProcessTest, DuplicatePointsWithoutNoiseEscalateJitterInsteadOfFailing) {
  Eigen::MatrixXd x(3, 1);
  x << 0.4, 0.4, 0.4;
  const GpHyperparameters h = Hyper(Eigen::VectorXd::Constant(1, 0.5), 1.0, 0.0);
  absl::StatusOr<GaussianProcess> gp = GaussianProcess::Fit(x, Eigen::Vector3d(1, 1, 1), h);
  ASSERT_TRUE(gp.ok()) << gp.status();
  EXPECT_GT(gp->jitter(), 0);
  Eigen::MatrixXd q(1, 1);
  q << 0.4;
  EXPECT_NEAR(gp->Predict(q).mean[0], 1.0, 1e-3);
}

TEST(GaussianProcessTest, FantasiesKeepTheMeanAndShrinkTheVariance) {
  Eigen::MatrixXd x(2, 1);
  x << 0.1, 0.9;
  const GpHyperparameters h = Hyper(Eigen::VectorXd::Constant(1, 0.3), 1.0, 1e-6);
  absl::StatusOr<GaussianProcess> gp = GaussianProcess::Fit(x, Eigen::Vector2d(0.0, 1.0), h);
  ASSERT_TRUE(gp.ok());
  Eigen::MatrixXd pending(1, 1);
  pending << 0.5;
  absl::StatusOr<GaussianProcess> believer = gp->WithFantasies(pending);
  ASSERT_TRUE(believer.ok());
  Eigen::MatrixXd q(2, 1);
  q << 0.5, 0.55;
  const auto before = gp->Predict(q), after = believer->Predict(q);
  EXPECT_NEAR(after.mean[0], before.mean[0], 1e-9);
  EXPECT_NEAR(after.mean[1], before.mean[1], 1e-9);
  EXPECT_LT(after.variance[0], 1e-5);
  EXPECT_LT(after.variance[1], 0.5 * before.variance[1]);
}

TEST(GaussianProcessTest, RejectsMismatchedOrNonFiniteInputs) {
  const GpHyperparameters h = Hyper(Eigen::VectorXd::Constant(1, 0.5), 1.0, 1e-6);
  Eigen::MatrixXd x(2, 1);
  x << 0.1, 0.2;
  EXPECT_EQ(GaussianProcess::Fit(x, Eigen::VectorXd::Zero(3), h).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GaussianProcess::Fit(x, Eigen::Vector2d(0, NAN), h).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GaussianProcess::Fit(Eigen::MatrixXd::Zero(2, 2), Eigen::VectorXd::Zero(2), h)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sextant
