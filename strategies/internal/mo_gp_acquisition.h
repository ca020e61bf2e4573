#ifndef SEXTANT_STRATEGIES_INTERNAL_MO_GP_ACQUISITION_H_
#define SEXTANT_STRATEGIES_INTERNAL_MO_GP_ACQUISITION_H_

#include <Eigen/Core>
#include <optional>
#include <vector>

#include "strategies/gaussian_process.h"
#include "strategies/internal/ehvi.h"

namespace sextant::internal {

// The log-scale pieces the Bayesian sampler adds up into one acquisition when it has several
// objectives, constraints or a cost model. Each takes encoded points, one per row, and
// returns one value per row. Pure functions of immutable models.

// A GP on one constraint's violations, with the threshold that "satisfied" (violation <= 0)
// becomes in the GP's standardised output space.
struct ConstraintModel {
  GaussianProcess gp;
  double threshold = 0;
};

// log Π_j P(c_j(x) <= threshold_j) under each constraint's posterior (0 without constraints).
Eigen::VectorXd LogProbabilityOfFeasibility(const std::vector<ConstraintModel>& constraints,
                                            const Eigen::MatrixXd& points);

// log EHVI (see EhviBoxes) under the independent posteriors of the objectives' GPs, whose
// outputs are the space that boxes was built in.
Eigen::VectorXd LogExpectedHypervolumeImprovement(const std::vector<GaussianProcess>& objectives,
                                                  const EhviBoxes& boxes,
                                                  const Eigen::MatrixXd& points);

// log expected improvement below best under gp (LogExpectedImprovement).
Eigen::VectorXd LogExpectedImprovements(const GaussianProcess& gp, double best,
                                        const Eigen::MatrixXd& points);

// A GP on standardised log cost: log cost = offset + scale · f.
struct CostModel {
  GaussianProcess gp;
  double offset = 0;
  double scale = 1;
};

// The posterior mean of log cost (natural log of dollars).
Eigen::VectorXd PredictedLogCost(const CostModel& cost, const Eigen::MatrixXd& points);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_MO_GP_ACQUISITION_H_
