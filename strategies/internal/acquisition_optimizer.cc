#include "strategies/internal/acquisition_optimizer.h"

#include <nlopt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "strategies/acquisition.h"
#include "strategies/internal/sobol_sequence.h"
#include "strategies/internal/splitmix.h"

namespace sextant::internal {
namespace {

constexpr double kBelowOne = 1 - 0x1.0p-40;

// Rows of parameter unit coordinates: a scrambled Sobol prefix, or plain uniform draws when
// the space has more dimensions than the direction-number table.
std::vector<std::vector<double>> SobolUnits(size_t dims, int count, uint64_t seed) {
  std::vector<std::vector<double>> rows;
  absl::StatusOr<SobolSequence> sequence = SobolSequence::Create(dims);
  std::mt19937_64 engine(StreamSeed(seed, 0x5e0b));
  for (int i = 0; i < count; ++i) {
    std::vector<double> u(dims);
    absl::StatusOr<std::vector<uint32_t>> raw =
        sequence.ok() ? sequence->Point(static_cast<uint64_t>(i))
                      : absl::StatusOr<std::vector<uint32_t>>(std::vector<uint32_t>());
    for (size_t d = 0; d < dims; ++d) {
      u[d] = raw.ok() && raw->size() == dims
                 ? static_cast<double>(OwenScramble((*raw)[d], StreamSeed(seed, d))) * 0x1.0p-32
                 : UnitFromBits(engine());
    }
    rows.push_back(std::move(u));
  }
  return rows;
}

double StandardNormal(std::mt19937_64& engine) {
  const double u1 = 1 - UnitFromBits(engine());
  const double u2 = UnitFromBits(engine());
  return std::sqrt(-2 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

// Perturbations of an anchor's parameter unit coordinates at log-uniform scales between 1e-3
// and 0.2, so that both fine local moves and jumps to a neighbouring basin are screened.
// Categoricals are redrawn with probability 1/5.
std::vector<std::vector<double>> Perturbations(const UnitEncoding& encoding,
                                               const Eigen::VectorXd& anchor, int count,
                                               std::mt19937_64& engine) {
  const std::vector<double> centre = encoding.ToParamUnits(anchor);
  const auto& params = encoding.space().params;
  // Perturbing every coordinate of a high-dimensional point almost always leaves the region
  // where it was good; at most ~20 coordinates move at once (as in BoTorch).
  const double move_prob = std::min(1.0, 20.0 / static_cast<double>(params.size()));
  std::vector<std::vector<double>> rows;
  for (int c = 0; c < count; ++c) {
    const double scale = std::exp(std::log(1e-3) + UnitFromBits(engine()) * std::log(200.0));
    std::vector<double> u = centre;
    for (size_t d = 0; d < u.size(); ++d) {
      if (UnitFromBits(engine()) >= move_prob) continue;
      if (params[d].kind == ParamSpec::Kind::kCategorical) {
        if (UnitFromBits(engine()) < 0.2) u[d] = UnitFromBits(engine());
      } else {
        u[d] = std::clamp(u[d] + scale * StandardNormal(engine), 0.0, kBelowOne);
      }
    }
    rows.push_back(std::move(u));
  }
  return rows;
}

// What is maximised: log EI below `best`, plus a log penalty that vanishes beyond a few
// `radius` lengthscales from each repeller (a pending trial) and goes to -inf on it.
struct Criterion {
  const GaussianProcess* gp;
  double best;
  const Eigen::MatrixXd* repellers;
  double radius;
};

// Σ_j log(1 - exp(-r_j² / (2·radius²))), r_j the lengthscale-scaled distance to repeller j,
// and (when gradient is set) its gradient.
double Penalty(const Eigen::VectorXd& z, const Eigen::MatrixXd& repellers,
               const Eigen::ArrayXd& inv_l2, double radius, Eigen::VectorXd* gradient) {
  const double inv_rho2 = 1 / (radius * radius);
  double penalty = 0;
  for (Eigen::Index j = 0; j < repellers.rows(); ++j) {
    const Eigen::ArrayXd diff = z.array() - repellers.row(j).transpose().array();
    const double a = 0.5 * inv_rho2 * (diff.square() * inv_l2).sum();
    if (a > 40) continue;  // exp(-40) < 1e-17: no penalty left to speak of
    penalty += a > std::numbers::ln2 ? std::log1p(-std::exp(-a)) : std::log(-std::expm1(-a));
    if (gradient != nullptr) *gradient += ((diff * inv_l2) * (inv_rho2 / std::expm1(a))).matrix();
  }
  return penalty;
}

double RepulsionPenalty(const Criterion& c, const Eigen::VectorXd& z, Eigen::VectorXd* gradient) {
  if (c.radius <= 0 || c.repellers->rows() == 0) return 0;
  return Penalty(z, *c.repellers, c.gp->hyperparameters().lengthscales.array().square().inverse(),
                 c.radius, gradient);
}

Eigen::VectorXd ScoreAll(const Criterion& c, const Eigen::MatrixXd& points) {
  const GaussianProcess::Prediction p = c.gp->Predict(points);
  Eigen::VectorXd score(points.rows());
  for (Eigen::Index i = 0; i < points.rows(); ++i) {
    const double value = LogExpectedImprovement(p.mean[i], std::sqrt(p.variance[i]), c.best) +
                         RepulsionPenalty(c, points.row(i).transpose(), nullptr);
    score[i] = std::isnan(value) ? -std::numeric_limits<double>::infinity() : value;
  }
  return score;
}

struct LocalProblem {
  Criterion criterion;
  Eigen::VectorXd z;  // the full point; the optimiser moves `free` coordinates of it
  std::vector<int> free;
};

double NegativeLogEi(unsigned count, const double* x, double* grad, void* data) {
  auto* problem = static_cast<LocalProblem*>(data);
  const Criterion& c = problem->criterion;
  for (unsigned i = 0; i < count; ++i) problem->z[problem->free[i]] = x[i];
  const GaussianProcess::PointPrediction p = c.gp->PredictWithGradient(problem->z);
  const double sd = std::sqrt(std::max(p.variance, 1e-20));
  const LogEiWithGradient ei = LogExpectedImprovementWithGradient(p.mean, sd, c.best);
  Eigen::VectorXd penalty_gradient = Eigen::VectorXd::Zero(problem->z.size());
  const double value = ei.value + RepulsionPenalty(c, problem->z, &penalty_gradient);
  if (!std::isfinite(value)) {
    if (grad != nullptr) std::fill(grad, grad + count, 0.0);
    return 1e300;
  }
  if (grad != nullptr) {
    for (unsigned i = 0; i < count; ++i) {
      const int j = problem->free[i];
      grad[i] =
          -(ei.d_mean * p.d_mean[j] + ei.d_sd * p.d_variance[j] / (2 * sd) + penalty_gradient[j]);
    }
  }
  return -value;
}

// Bounded L-BFGS over z's active numeric coordinates; returns the relaxed optimum, or
// nothing when z has no such coordinates.
std::optional<Eigen::VectorXd> Refine(const Criterion& criterion, const UnitEncoding& encoding,
                                      const Eigen::VectorXd& z, int evaluations) {
  LocalProblem problem{criterion, z, encoding.NumericCoordinates(encoding.Decode(z))};
  if (problem.free.empty()) return std::nullopt;
  const auto count = static_cast<unsigned>(problem.free.size());
  std::vector<double> x(count), lower(count, 0.0), upper(count, kBelowOne);
  for (unsigned i = 0; i < count; ++i) x[i] = z[problem.free[i]];
  nlopt_opt opt = nlopt_create(NLOPT_LD_LBFGS, count);
  if (opt == nullptr) return std::nullopt;
  nlopt_set_lower_bounds(opt, lower.data());
  nlopt_set_upper_bounds(opt, upper.data());
  nlopt_set_min_objective(opt, &NegativeLogEi, &problem);
  nlopt_set_maxeval(opt, evaluations);
  nlopt_set_xtol_rel(opt, 1e-6);
  double value = 0;
  const nlopt_result result = nlopt_optimize(opt, x.data(), &value);
  nlopt_destroy(opt);
  // On failure x may hold an unfinished step; the unrefined candidate is still in the pool.
  if (result < 0) return std::nullopt;
  Eigen::VectorXd out = z;
  for (unsigned i = 0; i < count; ++i) out[problem.free[i]] = x[i];
  return out;
}

// The first `count` candidates in order of decreasing score that differ from each other.
std::vector<Eigen::Index> BestDistinct(const Eigen::MatrixXd& points, const Eigen::VectorXd& score,
                                       int count) {
  std::vector<Eigen::Index> order(points.rows());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&score](auto a, auto b) { return score[a] > score[b]; });
  std::vector<Eigen::Index> chosen;
  for (Eigen::Index i : order) {
    if (static_cast<int>(chosen.size()) >= count) break;
    bool distinct = true;
    for (Eigen::Index c : chosen) distinct = distinct && points.row(c) != points.row(i);
    if (distinct) chosen.push_back(i);
  }
  return chosen;
}

Eigen::MatrixXd ToMatrix(const std::vector<Eigen::VectorXd>& rows, Eigen::Index cols) {
  Eigen::MatrixXd m(rows.size(), cols);
  for (size_t i = 0; i < rows.size(); ++i) m.row(i) = rows[i].transpose();
  return m;
}

// The screening pool: options.sobol_candidates scrambled Sobol points, then
// options.perturbed_candidates perturbations shared among the anchors.
Eigen::MatrixXd ScreeningCandidates(const UnitEncoding& encoding,
                                    const std::vector<Eigen::VectorXd>& anchors,
                                    const AcquisitionOptions& options) {
  const size_t dims = encoding.space().params.size();
  std::vector<Eigen::VectorXd> candidates;
  for (const auto& u : SobolUnits(dims, options.sobol_candidates, options.seed)) {
    candidates.push_back(encoding.FromParamUnits(u));
  }
  std::mt19937_64 engine(StreamSeed(options.seed, 0xa11c));
  for (size_t a = 0; a < anchors.size(); ++a) {
    const int count =
        options.perturbed_candidates / static_cast<int>(anchors.size()) +
        (static_cast<int>(a) < options.perturbed_candidates % static_cast<int>(anchors.size()) ? 1
                                                                                               : 0);
    for (const auto& u : Perturbations(encoding, anchors[a], count, engine)) {
      candidates.push_back(encoding.FromParamUnits(u));
    }
  }
  return ToMatrix(candidates, encoding.dimension());
}

// Refined then screened points with their scores, best first (ties keep that order).
std::vector<ScoredPoint> Ranked(const std::vector<Eigen::VectorXd>& refined,
                                const Eigen::VectorXd& refined_score,
                                const Eigen::MatrixXd& screened,
                                const Eigen::VectorXd& screen_score) {
  std::vector<ScoredPoint> out;
  for (size_t i = 0; i < refined.size(); ++i) out.push_back({refined[i], refined_score[i]});
  for (Eigen::Index i = 0; i < screened.rows(); ++i) {
    out.push_back({screened.row(i).transpose(), screen_score[i]});
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const ScoredPoint& a, const ScoredPoint& b) { return a.log_ei > b.log_ei; });
  return out;
}

struct ScorerProblem {
  const PointScorer* score;
  Eigen::MatrixXd z;  // one row: the full point; the optimiser moves `free` coordinates of it
  std::vector<int> free;
};

double NegativeScore(unsigned count, const double* x, double* /*grad*/, void* data) {
  auto* problem = static_cast<ScorerProblem*>(data);
  for (unsigned i = 0; i < count; ++i) problem->z(0, problem->free[i]) = x[i];
  const double value = (*problem->score)(problem->z)[0];
  return std::isfinite(value) ? -value : 1e300;
}

// Refine without gradients: BOBYQA's quadratic models need few evaluations in a handful of
// coordinates; COBYLA covers the single-coordinate case BOBYQA does not take.
std::optional<Eigen::VectorXd> RefineWithoutGradient(const PointScorer& score,
                                                     const UnitEncoding& encoding,
                                                     const Eigen::VectorXd& z, int evaluations) {
  ScorerProblem problem{&score, z.transpose(), encoding.NumericCoordinates(encoding.Decode(z))};
  if (problem.free.empty()) return std::nullopt;
  const auto count = static_cast<unsigned>(problem.free.size());
  std::vector<double> x(count), lower(count, 0.0), upper(count, kBelowOne);
  for (unsigned i = 0; i < count; ++i) x[i] = z[problem.free[i]];
  nlopt_opt opt = nlopt_create(count >= 2 ? NLOPT_LN_BOBYQA : NLOPT_LN_COBYLA, count);
  if (opt == nullptr) return std::nullopt;
  nlopt_set_lower_bounds(opt, lower.data());
  nlopt_set_upper_bounds(opt, upper.data());
  nlopt_set_min_objective(opt, &NegativeScore, &problem);
  nlopt_set_maxeval(opt, evaluations);
  nlopt_set_xtol_rel(opt, 1e-6);
  // Steps of a few hundredths: the screening has already found the basin.
  nlopt_set_initial_step1(opt, 0.02);
  double value = 0;
  const nlopt_result result = nlopt_optimize(opt, x.data(), &value);
  nlopt_destroy(opt);
  if (result < 0) return std::nullopt;
  Eigen::VectorXd out = z;
  for (unsigned i = 0; i < count; ++i) out[problem.free[i]] = x[i];
  return out;
}

// Coordinate ascent over categorical values, after the local search of Optuna's GPSampler:
// from z, every other value of each active categorical is scored (one batch per parameter),
// and z moves to the best of them when it scores higher, until a sweep moves nothing. Every
// point scored is appended to `seen`, so that a caller that skips points it already has still
// finds the unevaluated neighbours of a good configuration among them: screening alone covers
// a few hundred of the thousands of configurations of a categorical space, and without the
// neighbours the search kept proposing points around lucky noisy values (bench/hpo cat6).
constexpr int kCategoricalSweeps = 4;

void CategoricalAscent(const PointScorer& score, const UnitEncoding& encoding, Eigen::VectorXd z,
                       double value, std::vector<ScoredPoint>& seen) {
  const auto& params = encoding.space().params;
  const auto& blocks = encoding.blocks();
  for (int sweep = 0; sweep < kCategoricalSweeps; ++sweep) {
    bool moved = false;
    for (size_t i = 0; i < params.size(); ++i) {
      const UnitEncoding::Block& block = blocks[i];
      if (params[i].kind != ParamSpec::Kind::kCategorical || block.width < 2) continue;
      Eigen::Index current = -1;
      if (z.segment(block.offset, block.width).maxCoeff(&current) <= 0) continue;  // inactive
      std::vector<Eigen::VectorXd> options;
      for (int v = 0; v < block.width; ++v) {
        if (v == current) continue;
        Eigen::VectorXd option = z;
        option.segment(block.offset, block.width).setZero();
        option[block.offset + v] = 1;
        options.push_back(encoding.Encode(encoding.Decode(option)));
      }
      Eigen::MatrixXd batch(static_cast<Eigen::Index>(options.size()), z.size());
      for (size_t k = 0; k < options.size(); ++k) {
        batch.row(static_cast<Eigen::Index>(k)) = options[k].transpose();
      }
      const Eigen::VectorXd scores = score(batch);
      Eigen::Index best = 0;
      for (Eigen::Index k = 0; k < scores.size(); ++k) {
        seen.push_back({options[static_cast<size_t>(k)], scores[k]});
        if (scores[k] > scores[best]) best = k;
      }
      if (scores[best] > value) {
        z = options[static_cast<size_t>(best)];
        value = scores[best];
        moved = true;
      }
    }
    if (!moved) break;
  }
}

bool HasCategorical(const UnitEncoding& encoding) {
  const auto& params = encoding.space().params;
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].kind == ParamSpec::Kind::kCategorical && encoding.blocks()[i].width >= 2) {
      return true;
    }
  }
  return false;
}

// Ranked, with the points of a categorical ascent from each refined point (or, where there
// was none, its screened start) among them.
std::vector<ScoredPoint> RankedWithAscent(const PointScorer& score, const UnitEncoding& encoding,
                                          const std::vector<Eigen::VectorXd>& starts,
                                          const Eigen::VectorXd& start_score,
                                          const std::vector<Eigen::VectorXd>& refined,
                                          const Eigen::VectorXd& refined_score,
                                          const Eigen::MatrixXd& screened,
                                          const Eigen::VectorXd& screen_score) {
  std::vector<ScoredPoint> out = Ranked(refined, refined_score, screened, screen_score);
  if (!HasCategorical(encoding)) return out;
  std::vector<ScoredPoint> seen;
  for (size_t i = 0; i < starts.size(); ++i) {
    CategoricalAscent(score, encoding, starts[i], start_score[static_cast<Eigen::Index>(i)], seen);
  }
  out.insert(out.end(), seen.begin(), seen.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const ScoredPoint& a, const ScoredPoint& b) { return a.log_ei > b.log_ei; });
  return out;
}

// The local search's starts: each of the best distinct screened candidates, refined where it
// could be, with its score.
struct Starts {
  std::vector<Eigen::VectorXd> points;
  Eigen::VectorXd scores;
};

Starts StartsOf(const PointScorer& score, const UnitEncoding& encoding,
                const std::vector<Eigen::Index>& chosen, const Eigen::MatrixXd& screened,
                const std::vector<std::optional<Eigen::VectorXd>>& refined) {
  Starts s;
  for (size_t i = 0; i < chosen.size(); ++i) {
    s.points.push_back(refined[i].has_value() ? *refined[i]
                                              : Eigen::VectorXd(screened.row(chosen[i]).transpose()));
  }
  if (!s.points.empty()) s.scores = score(ToMatrix(s.points, encoding.dimension()));
  return s;
}

}  // namespace

std::vector<ScoredPoint> MaximizeLogEi(const GaussianProcess& gp, double best,
                                       const UnitEncoding& encoding,
                                       const std::vector<Eigen::VectorXd>& anchors,
                                       const Eigen::MatrixXd& repellers,
                                       const AcquisitionOptions& options) {
  const Criterion criterion{&gp, best, &repellers, options.repulsion_radius};
  const PointScorer score = [&criterion](const Eigen::MatrixXd& points) {
    return ScoreAll(criterion, points);
  };
  const Eigen::MatrixXd screened = ScreeningCandidates(encoding, anchors, options);
  const Eigen::VectorXd screen_score = ScoreAll(criterion, screened);
  std::vector<Eigen::VectorXd> refined;
  std::vector<std::optional<Eigen::VectorXd>> refined_at;
  const std::vector<Eigen::Index> chosen =
      BestDistinct(screened, screen_score, options.local_starts);
  for (Eigen::Index i : chosen) {
    std::optional<Eigen::VectorXd> z =
        Refine(criterion, encoding, screened.row(i).transpose(), options.local_evaluations);
    if (z.has_value()) z = encoding.Encode(encoding.Decode(*z));
    if (z.has_value()) refined.push_back(*z);
    refined_at.push_back(z);
  }
  Eigen::VectorXd refined_score;
  if (!refined.empty()) {
    refined_score = ScoreAll(criterion, ToMatrix(refined, encoding.dimension()));
  }
  const Starts starts = StartsOf(score, encoding, chosen, screened, refined_at);
  return RankedWithAscent(score, encoding, starts.points, starts.scores, refined, refined_score,
                          screened, screen_score);
}

std::vector<ScoredPoint> MaximizeScore(const PointScorer& score, const UnitEncoding& encoding,
                                       const std::vector<Eigen::VectorXd>& anchors,
                                       const AcquisitionOptions& options) {
  const PointScorer safe = [&score](const Eigen::MatrixXd& points) {
    Eigen::VectorXd s = score(points);
    for (double& v : s) v = std::isnan(v) ? -std::numeric_limits<double>::infinity() : v;
    return s;
  };
  const Eigen::MatrixXd screened = ScreeningCandidates(encoding, anchors, options);
  const Eigen::VectorXd screen_score = safe(screened);
  std::vector<Eigen::VectorXd> refined;
  std::vector<std::optional<Eigen::VectorXd>> refined_at;
  const std::vector<Eigen::Index> chosen =
      BestDistinct(screened, screen_score, options.local_starts);
  for (Eigen::Index i : chosen) {
    std::optional<Eigen::VectorXd> z = RefineWithoutGradient(
        safe, encoding, screened.row(i).transpose(), options.local_evaluations);
    if (z.has_value()) z = encoding.Encode(encoding.Decode(*z));
    if (z.has_value()) refined.push_back(*z);
    refined_at.push_back(z);
  }
  Eigen::VectorXd refined_score;
  if (!refined.empty()) refined_score = safe(ToMatrix(refined, encoding.dimension()));
  const Starts starts = StartsOf(safe, encoding, chosen, screened, refined_at);
  return RankedWithAscent(safe, encoding, starts.points, starts.scores, refined, refined_score,
                          screened, screen_score);
}

double RepulsionPenalty(const Eigen::VectorXd& z, const Eigen::MatrixXd& repellers,
                        const Eigen::VectorXd& lengthscales, double radius) {
  if (radius <= 0 || repellers.rows() == 0) return 0;
  return Penalty(z, repellers, lengthscales.array().square().inverse(), radius, nullptr);
}

}  // namespace sextant::internal
