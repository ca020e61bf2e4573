#ifndef SEXTANT_STRATEGIES_INTERNAL_OUTPUT_TRANSFORM_H_
#define SEXTANT_STRATEGIES_INTERNAL_OUTPUT_TRANSFORM_H_

#include <Eigen/Core>

namespace sextant::internal {

// How objective values are reshaped before a GP sees them. Every warp is monotone increasing,
// so minima stay minima.
enum class OutputWarp {
  kNone,          // standardise only
  kRankGaussian,  // Gaussian copula: normal scores of the (tie-averaged) ranks
  kLog,           // log(y - min + c), with c the median's distance to min
  kBoxCox,        // Box–Cox of (y - min + c), λ in [-1, 2] by maximum likelihood
  kTailLog,       // identity up to the upper quartile, logarithmic above it
};

// Returns the warped values standardised to mean 0 and standard deviation 1 (all zeros when
// the warped values are all equal). y must be finite.
Eigen::VectorXd WarpAndStandardize(const Eigen::VectorXd& y, OutputWarp warp);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_OUTPUT_TRANSFORM_H_
