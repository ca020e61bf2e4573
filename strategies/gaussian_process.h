#ifndef SEXTANT_STRATEGIES_GAUSSIAN_PROCESS_H_
#define SEXTANT_STRATEGIES_GAUSSIAN_PROCESS_H_

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace sextant {

// Hyperparameters of a zero-mean Gaussian process with a Matérn-5/2 ARD kernel
//   k(a, b) = signal_variance · (1 + √5·r + 5r²/3) · exp(-√5·r),  r² = Σ_j (a_j - b_j)² / l_j²
// and noise_variance added on the diagonal of the training covariance.
struct GpHyperparameters {
  Eigen::VectorXd lengthscales;  // l_j > 0, one per input dimension
  double signal_variance = 1;
  double noise_variance = 1e-6;
};

// The kernel k(a, b) above (noise excluded). a, b and h.lengthscales have equal sizes.
double Matern52(const Eigen::VectorXd& a, const Eigen::VectorXd& b, const GpHyperparameters& h);

// A Gaussian process conditioned on observations. Immutable after Fit, so its const methods
// may run concurrently; it has no other synchronisation.
class GaussianProcess {
 public:
  // Conditions the prior on y[i] observed at row i of x. Returns InvalidArgument for
  // mismatched sizes, no rows, or non-finite inputs. When K + noise·I is not numerically
  // positive definite, jitter (1e-10 · signal variance, growing tenfold) is added to the
  // diagonal until it is; Internal when even 0.1 · signal variance does not suffice.
  static absl::StatusOr<GaussianProcess> Fit(Eigen::MatrixXd x, Eigen::VectorXd y,
                                             GpHyperparameters h);

  // Posterior of the latent function (noise excluded) at each row of points. Variances are
  // clamped at 0 from below.
  struct Prediction {
    Eigen::VectorXd mean;
    Eigen::VectorXd variance;
  };
  Prediction Predict(const Eigen::MatrixXd& points) const;

  // Posterior at one point, with the gradients of mean and variance with respect to it.
  struct PointPrediction {
    double mean = 0;
    double variance = 0;
    Eigen::VectorXd d_mean;
    Eigen::VectorXd d_variance;
  };
  PointPrediction PredictWithGradient(const Eigen::VectorXd& point) const;

  // This GP further conditioned on observing, at each row of points, its current posterior
  // mean there ("kriging believer" fantasies): means are unchanged, variances shrink. Errors
  // as Fit.
  absl::StatusOr<GaussianProcess> WithFantasies(const Eigen::MatrixXd& points) const;

  const GpHyperparameters& hyperparameters() const { return h_; }
  const Eigen::MatrixXd& x() const { return x_; }
  const Eigen::VectorXd& y() const { return y_; }
  // The diagonal jitter added beyond the noise variance (0 when none was needed).
  double jitter() const { return jitter_; }

 private:
  GaussianProcess() = default;

  Eigen::MatrixXd x_;         // n × d training inputs
  Eigen::VectorXd y_;         // n training targets
  Eigen::MatrixXd scaled_t_;  // d × n: x_ transposed, each dimension divided by its lengthscale
  GpHyperparameters h_;
  Eigen::LLT<Eigen::MatrixXd> llt_;
  Eigen::VectorXd alpha_;  // (K + noise·I)⁻¹ y
  double jitter_ = 0;
};

// Independent log-normal priors on the hyperparameters, with box bounds, all in natural-log
// space: log l_j ~ N(lengthscale_mean, lengthscale_sd²), and likewise for the others.
struct GpPrior {
  double lengthscale_mean = 0;
  double lengthscale_sd = 1;
  double lengthscale_min = 0.005;
  double lengthscale_max = 1000;
  double signal_mean = 0;  // outputs are expected standardised
  double signal_sd = 1;
  double signal_min = 0.01;
  double signal_max = 100;
  double noise_mean = -9.2;  // log(1e-4)
  double noise_sd = 2;
  // Outputs are standardised, so this floor is relative to their spread: at 1e-6 (a noise sd
  // of 1e-3 of it) a noiseless search stalled once its remaining improvements fell below
  // that, e.g. Rosenbrock-4 at regret ~0.5 with values spanning thousands (bench/hpo).
  double noise_min = 1e-10;
  double noise_max = 1;
};

// The prior used for `dimension` inputs in the unit cube: lengthscale median 0.5 up to 6
// inputs, growing like sqrt(dimension) beyond; see the .cc for why.
GpPrior DefaultGpPrior(int dimension);

// log p(y | x, h) and its gradient with respect to the log hyperparameters, ordered
// [log l_1 .. log l_d, log signal_variance, log noise_variance]. Errors as GaussianProcess::Fit.
struct LogLikelihood {
  double value = 0;
  Eigen::VectorXd gradient;
};
absl::StatusOr<LogLikelihood> LogMarginalLikelihood(const Eigen::MatrixXd& x,
                                                    const Eigen::VectorXd& y,
                                                    const GpHyperparameters& h);

struct GpFitOptions {
  std::optional<GpPrior> prior;  // default (unset): DefaultGpPrior(x.cols())
  // L-BFGS starts in all: warm_start when set, then the prior median, then draws from the
  // prior. Default 3; at least 1.
  int starts = 3;
  int max_evaluations = 60;                     // objective evaluations per start
  uint64_t seed = 0;                            // seeds the random starts
  std::optional<GpHyperparameters> warm_start;  // an extra start, e.g. the last fit
  // Inputs that share one lengthscale: tie[j] is input j's group, groups numbered 0..G-1
  // (e.g. the one-hot coordinates of one categorical, whose shared lengthscale makes the
  // kernel a function of the number of differing categories). Default (empty): one
  // lengthscale per input. A size other than x.cols() is InvalidArgument.
  std::vector<int> tie;
};

// Maximum a posteriori hyperparameters: maximises log p(y | x, h) + log prior(h) within the
// prior's bounds by NLopt L-BFGS with analytic gradients from each start, keeping the best.
// With options.tie, the prior applies once per group and tied lengthscales come out equal.
// Deterministic given its arguments. Returns InvalidArgument for bad inputs (as Fit), and
// Internal when no start produced a finite objective.
absl::StatusOr<GpHyperparameters> FitGpHyperparameters(const Eigen::MatrixXd& x,
                                                       const Eigen::VectorXd& y,
                                                       const GpFitOptions& options);

}  // namespace sextant

#endif  // SEXTANT_STRATEGIES_GAUSSIAN_PROCESS_H_
