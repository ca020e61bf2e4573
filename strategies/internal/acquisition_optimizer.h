#ifndef SEXTANT_STRATEGIES_INTERNAL_ACQUISITION_OPTIMIZER_H_
#define SEXTANT_STRATEGIES_INTERNAL_ACQUISITION_OPTIMIZER_H_

#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <vector>

#include "strategies/gaussian_process.h"
#include "strategies/internal/unit_encoding.h"

namespace sextant::internal {

struct AcquisitionOptions {
  int sobol_candidates = 512;      // scrambled Sobol points over the whole space
  int perturbed_candidates = 256;  // Gaussian perturbations of the anchors, shared among them
  int local_starts = 3;            // best distinct candidates refined by bounded L-BFGS
  int local_evaluations = 40;      // log-EI evaluations per refinement
  uint64_t seed = 0;               // seeds the Sobol scramble and the perturbations
  // Repellers (pending trials) push candidates away: log EI is penalised by
  // log(1 - exp(-r²/(2ρ²))) per repeller, r the distance in lengthscales and ρ this radius.
  // 0 turns the penalty off.
  double repulsion_radius = 0.2;
};

struct ScoredPoint {
  Eigen::VectorXd z;  // a feasible encoded point (Encode of Decode of itself)
  double log_ei = 0;
};

// Searches for the encoded point maximising log expected improvement below `best` under gp,
// penalised near each row of `repellers` (see AcquisitionOptions::repulsion_radius): screens
// Sobol points and perturbations of `anchors` (encoded points, e.g. the best observations),
// then refines the most promising ones over their active numeric coordinates and rounds them
// back to feasibility. Returns every feasible point scored, best first (ties
// keep generation order), so that a caller can skip ones it already has. Deterministic.
std::vector<ScoredPoint> MaximizeLogEi(const GaussianProcess& gp, double best,
                                       const UnitEncoding& encoding,
                                       const std::vector<Eigen::VectorXd>& anchors,
                                       const Eigen::MatrixXd& repellers,
                                       const AcquisitionOptions& options);

// Scores encoded points, one per row of an n × dimension matrix: larger is better, -inf where
// there is nothing to gain. Called with single rows during refinement.
using PointScorer = std::function<Eigen::VectorXd(const Eigen::MatrixXd& points)>;

// MaximizeLogEi for any acquisition: the same screening (Sobol points and perturbations of
// anchors, from options.seed), then a derivative-free local refinement (NLopt BOBYQA, COBYLA
// for one coordinate) of the options.local_starts best distinct candidates with
// options.local_evaluations evaluations each. Repulsion is the scorer's to apply (see
// RepulsionPenalty); options.repulsion_radius is ignored. Returns every feasible point
// scored, best first (ties keep generation order). Deterministic when score is.
std::vector<ScoredPoint> MaximizeScore(const PointScorer& score, const UnitEncoding& encoding,
                                       const std::vector<Eigen::VectorXd>& anchors,
                                       const AcquisitionOptions& options);

// The log penalty MaximizeLogEi adds near pending trials: Σ_j log(1 - exp(-r_j²/(2ρ²))), r_j
// the distance from z to row j of repellers in units of lengthscales and ρ = radius. 0 when
// radius <= 0 or there are no repellers; -inf on a repeller.
double RepulsionPenalty(const Eigen::VectorXd& z, const Eigen::MatrixXd& repellers,
                        const Eigen::VectorXd& lengthscales, double radius);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_ACQUISITION_OPTIMIZER_H_
