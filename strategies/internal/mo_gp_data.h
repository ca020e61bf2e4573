#ifndef SEXTANT_STRATEGIES_INTERNAL_MO_GP_DATA_H_
#define SEXTANT_STRATEGIES_INTERNAL_MO_GP_DATA_H_

#include <Eigen/Core>
#include <vector>

#include "absl/types/span.h"
#include "strategies/internal/unit_encoding.h"
#include "strategies/sampler.h"

namespace sextant::internal {

// The finished trials as the Bayesian sampler's models see them when it has several
// objectives, constraints or a cost model. Rows are finished trials in history order.
struct OutputData {
  std::vector<Eigen::VectorXd> x;               // encoded
  std::vector<std::vector<double>> y;           // one value per objective, minimised
  std::vector<std::vector<double>> violations;  // one per constraint, all finite
  std::vector<bool> valued;    // reported every objective (else y holds imputed values)
  std::vector<bool> feasible;  // valued, and every reported violation <= 0
  int valued_count = 0;
  // Trials that reported a positive, finite cost (failed ones too), for the cost model.
  std::vector<Eigen::VectorXd> cost_x;
  std::vector<double> log_cost;
  std::vector<Eigen::VectorXd> pending;  // encoded running trials
};

// Collects history for `objectives` objectives (1: Observation::value, else ::values) and
// `constraints` constraints. Finished trials without every objective value (failed, or
// pruned before reporting) get each objective's worst reported value, as the one-objective
// sampler does, so that the model steers away from where they ran. A missing violation
// (absent, NaN or +inf) becomes the largest finite violation reported for that constraint
// (1 when none is positive), which counts as clearly infeasible. With no valued trial, y of
// every row is empty.
OutputData CollectOutputs(const UnitEncoding& encoding, absl::Span<const Observation> history,
                          int objectives, int constraints);

// A scalar per row for choosing a subset to fit on (smaller is more important): the best
// rank the row reaches in any objective, with infeasible rows after every feasible one.
std::vector<double> ImportanceKeys(const OutputData& data);

// OutputData restricted to the rows `keep` (ascending); cost and pending rows unchanged.
OutputData SelectRows(OutputData data, absl::Span<const size_t> keep);

// The reference point for hypervolume, per column of y (n × objectives, the model's output
// space): the worst value plus 10% of the column's range (plus 1 when the range is 0), so
// that every observed point, the extremes of the front included, bounds some volume; as
// BoTorch's infer_reference_point does from the front's nadir.
std::vector<double> ReferencePoint(const Eigen::MatrixXd& y);

// A value v of one objective (minimised units, e.g. a given reference) in the model's output
// space, where raw[i] became warped[i] under a monotone increasing warp: linear between the
// nearest observed values (exact at them), and beyond them extrapolated along the outermost
// two distinct ones. With a single distinct raw value, v - raw[0] + warped[0].
double WarpedValue(const Eigen::VectorXd& raw, const Eigen::VectorXd& warped, double v);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_MO_GP_DATA_H_
