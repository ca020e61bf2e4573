#include "strategies/internal/mo_gp_acquisition.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "strategies/acquisition.h"

namespace sextant::internal {
namespace {

// Variances below this are rounding noise (the posterior at an observation of a nearly
// noiseless GP); the floor keeps z-scores finite.
constexpr double kMinVariance = 1e-20;

}  // namespace

Eigen::VectorXd LogProbabilityOfFeasibility(const std::vector<ConstraintModel>& constraints,
                                            const Eigen::MatrixXd& points) {
  Eigen::VectorXd out = Eigen::VectorXd::Zero(points.rows());
  for (const ConstraintModel& c : constraints) {
    const GaussianProcess::Prediction p = c.gp.Predict(points);
    for (Eigen::Index i = 0; i < points.rows(); ++i) {
      const double sd = std::sqrt(std::max(p.variance[i], kMinVariance));
      out[i] += LogNormalCdf((c.threshold - p.mean[i]) / sd);
    }
  }
  return out;
}

Eigen::VectorXd LogExpectedHypervolumeImprovement(const std::vector<GaussianProcess>& objectives,
                                                  const EhviBoxes& boxes,
                                                  const Eigen::MatrixXd& points) {
  std::vector<GaussianProcess::Prediction> predictions;
  for (const GaussianProcess& gp : objectives) predictions.push_back(gp.Predict(points));
  const size_t k = objectives.size();
  std::vector<double> mean(k), sd(k);
  Eigen::VectorXd out(points.rows());
  for (Eigen::Index i = 0; i < points.rows(); ++i) {
    for (size_t j = 0; j < k; ++j) {
      mean[j] = predictions[j].mean[i];
      sd[j] = std::sqrt(std::max(predictions[j].variance[i], kMinVariance));
    }
    out[i] = boxes.LogEhvi(mean, sd);
  }
  return out;
}

Eigen::VectorXd LogExpectedImprovements(const GaussianProcess& gp, double best,
                                        const Eigen::MatrixXd& points) {
  const GaussianProcess::Prediction p = gp.Predict(points);
  Eigen::VectorXd out(points.rows());
  for (Eigen::Index i = 0; i < points.rows(); ++i) {
    out[i] = LogExpectedImprovement(p.mean[i], std::sqrt(p.variance[i]), best);
  }
  return out;
}

Eigen::VectorXd PredictedLogCost(const CostModel& cost, const Eigen::MatrixXd& points) {
  return (cost.offset + cost.scale * cost.gp.Predict(points).mean.array()).matrix();
}

}  // namespace sextant::internal
