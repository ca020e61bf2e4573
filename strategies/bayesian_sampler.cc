#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "strategies/acquisition.h"
#include "strategies/gaussian_process.h"
#include "strategies/internal/acquisition_optimizer.h"
#include "strategies/internal/bayesian_tuning.h"
#include "strategies/internal/ehvi.h"
#include "strategies/internal/mo_gp_acquisition.h"
#include "strategies/internal/mo_gp_data.h"
#include "strategies/internal/output_transform.h"
#include "strategies/internal/splitmix.h"
#include "strategies/internal/unit_encoding.h"
#include "strategies/pareto.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace internal {
namespace {

// Default initial design: one Sobol point per parameter plus one, at least 5 (a GP fitted on
// fewer points is mostly prior) and at most 10 (beyond that the model already does better).
int DefaultInitialDesign(size_t params) {
  return static_cast<int>(std::min<size_t>(std::max<size_t>(5, params + 1), 10));
}

// With several objectives, twice that before the cap, 2(d + 1) as in BoTorch's multi-objective
// tutorials, at most 20: each objective's GP needs enough of the space to place the front,
// and a thin design spends the next trials on fronts that the first points only guessed (on
// 6-D DTLZ2 with 3 objectives, 14 points gave a better front at 50 and at 100 trials than 7).
int DefaultMultiObjectiveInitialDesign(size_t params) {
  return static_cast<int>(std::min<size_t>(std::max<size_t>(5, 2 * (params + 1)), 20));
}

// Default cap on the observations the GP is conditioned on: its posterior costs O(n²) per
// candidate point, and at 300 a suggestion still takes a few tens of milliseconds.
constexpr int kDefaultMaxObservations = 300;

// Hyperparameters are fitted on at most this many observations (see FitHyperparameters), so
// that a suggestion stays within tens of milliseconds at any history size, even the first
// suggestion of a fresh sampler.
constexpr int kHyperparameterFitLimit = 64;

// While the history is small, hyperparameters are refitted from several starts for every
// suggestion; past this size, from the previous fit alone (a fresh sampler's first fit
// always uses several starts).
constexpr int kColdFitLimit = 64;

// How many of the best observations seed perturbed candidates for the acquisition search.
constexpr size_t kAnchors = 5;

// A warm start's difference model δ (see TransferPoint), in standardised units: its variance
// before this run has a result (a standardised output's), and the least signal variance a fit
// may give it.
constexpr double kDefaultDeltaVariance = 1;
constexpr double kMinDeltaVariance = 0.1;

// Observations as the model sees them.
struct TrainingData {
  std::vector<Eigen::VectorXd> x;  // encoded finished trials of this run
  std::vector<double> y;           // their values; failures imputed as the worst value
  std::vector<Eigen::VectorXd> pending;
  int valued = 0;  // finished trials that reported a value
  // Earlier runs' trials (search.warm_start) with a value, apart from this run's own.
  std::vector<Eigen::VectorXd> prior_x;
  std::vector<double> prior_y;
};

// One lengthscale per parameter: a categorical's one-hot coordinates share one, so that the
// kernel sees how many categories differ (a Hamming distance, as Optuna's GPSampler has it)
// rather than which values. With a lengthscale per one-hot coordinate, 30 of them for six
// 5-way categoricals, the fit on a few dozen noisy values made some values irrelevant and the
// search circled around lucky noise (bench/hpo cat6).
std::vector<int> LengthscaleTie(const UnitEncoding& encoding) {
  std::vector<int> tie(static_cast<size_t>(encoding.dimension()));
  int group = 0;
  for (const UnitEncoding::Block& block : encoding.blocks()) {
    if (block.width == 0) continue;
    for (int k = 0; k < block.width; ++k) tie[static_cast<size_t>(block.offset + k)] = group;
    ++group;
  }
  return tie;
}

bool HasValue(const Observation& o) {
  return (o.outcome == Observation::Outcome::kCompleted ||
          o.outcome == Observation::Outcome::kPruned) &&
         o.value.has_value() && std::isfinite(*o.value);
}

TrainingData Collect(const UnitEncoding& encoding, absl::Span<const Observation> history) {
  TrainingData data;
  std::vector<Eigen::VectorXd> failed;
  for (const Observation& o : history) {
    if (o.prior) {
      if (HasValue(o)) {
        data.prior_x.push_back(encoding.Encode(o.params));
        data.prior_y.push_back(*o.value);
      }
    } else if (o.outcome == Observation::Outcome::kPending) {
      data.pending.push_back(encoding.Encode(o.params));
    } else if (HasValue(o)) {
      data.x.push_back(encoding.Encode(o.params));
      data.y.push_back(*o.value);
    } else {
      // Failed trials (and pruned or completed ones without a usable value) say the region
      // is bad; dropping them would send the search straight back there.
      failed.push_back(encoding.Encode(o.params));
    }
  }
  data.valued = static_cast<int>(data.y.size());
  if (data.valued == 0 && data.prior_y.empty()) return data;
  double worst = -std::numeric_limits<double>::infinity();
  for (double v : data.y) worst = std::max(worst, v);
  for (double v : data.prior_y) worst = std::max(worst, v);
  for (Eigen::VectorXd& x : failed) {
    data.x.push_back(std::move(x));
    data.y.push_back(worst);
  }
  return data;
}

// The indices (ascending) of a subset of `limit` of y's entries: the best half of the limit,
// and the rest drawn uniformly (seeded) from the others, so that a model fitted on it stays
// accurate where it matters and still sees the whole space.
std::vector<size_t> SubsetIndices(absl::Span<const double> y, size_t limit, uint64_t seed) {
  std::vector<size_t> order(y.size());
  std::iota(order.begin(), order.end(), 0);
  if (limit >= order.size()) return order;
  std::stable_sort(order.begin(), order.end(), [&y](size_t a, size_t b) { return y[a] < y[b]; });
  std::mt19937_64 engine(seed);
  // A partial Fisher–Yates shuffle of the rest with our own index draws, so the subset is the
  // same with every standard library.
  for (size_t i = limit / 2; i < limit; ++i) {
    const auto offset =
        static_cast<size_t>(UnitFromBits(engine()) * static_cast<double>(order.size() - i));
    std::swap(order[i], order[std::min(i + offset, order.size() - 1)]);
  }
  order.resize(limit);
  std::sort(order.begin(), order.end());
  return order;
}

// Keeps only SubsetIndices(y, limit, seed) of the rows (x[i], y[i]) when there are more than
// limit of them; returns whether it dropped any.
bool KeepSubset(std::vector<Eigen::VectorXd>& x, std::vector<double>& y, size_t limit,
                uint64_t seed) {
  if (y.size() <= limit) return false;
  std::vector<Eigen::VectorXd> kept_x;
  std::vector<double> kept_y;
  for (size_t i : SubsetIndices(y, limit, seed)) {
    kept_x.push_back(std::move(x[i]));
    kept_y.push_back(y[i]);
  }
  x = std::move(kept_x);
  y = std::move(kept_y);
  return true;
}

Eigen::MatrixXd ToMatrix(const std::vector<Eigen::VectorXd>& rows, int cols) {
  Eigen::MatrixXd m(static_cast<Eigen::Index>(rows.size()), cols);
  for (size_t i = 0; i < rows.size(); ++i) m.row(static_cast<Eigen::Index>(i)) = rows[i];
  return m;
}

// The best `count` rows of x by y.
std::vector<Eigen::VectorXd> BestRows(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                      size_t count) {
  std::vector<Eigen::Index> order(y.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&y](auto a, auto b) { return y[a] < y[b]; });
  std::vector<Eigen::VectorXd> rows;
  for (size_t i = 0; i < order.size() && i < count; ++i) rows.push_back(x.row(order[i]));
  return rows;
}

// The models of one suggestion with several objectives, constraints or a cost model.
struct Surrogates {
  // n × objectives: each objective standardised (one objective: also warped, tuning_.warp)
  Eigen::MatrixXd y;
  // Several objectives: the hypervolume reference point in y's space, the given one where
  // there is one and else derived (ReferencePoint).
  std::vector<double> reference;
  // One per objective and constraint, conditioned on the pending trials' believed outcomes.
  std::vector<GaussianProcess> objectives;
  std::vector<ConstraintModel> constraints;
  std::vector<bool> pending_feasible;  // per pending trial: believed to satisfy every constraint
  std::optional<double> best;          // one objective: the best feasible posterior mean, if any
  std::optional<CostModel> cost;
};

// A GP and the incumbent its expected improvement is measured against.
struct Model {
  GaussianProcess gp;
  double best;
};

class BayesianSampler final : public Sampler {
 public:
  BayesianSampler(SearchSpace space, BayesianOptions options, BayesianTuning tuning)
      : encoding_(space),
        initial_(NewSobolSampler(space, options.seed)),
        seed_(options.seed),
        initial_design_(options.initial_design > 0 ? options.initial_design
                        : options.objectives > 1
                            ? DefaultMultiObjectiveInitialDesign(space.params.size())
                            : DefaultInitialDesign(space.params.size())),
        max_observations_(options.max_observations > 0 ? options.max_observations
                                                       : kDefaultMaxObservations),
        objectives_(std::max(1, options.objectives)),
        constraints_(std::max(0, options.constraints)),
        cost_aware_(options.cost_aware && objectives_ == 1),
        reference_(options.reference),
        tuning_(std::move(tuning)),
        last_fits_(static_cast<size_t>(objectives_ + constraints_ + 2)) {}

  absl::StatusOr<Params> Ask(const SampleRequest& request) override {
    if (request.trial_number < 0) {
      return absl::InvalidArgumentError("trial_number must be >= 0");
    }
    if (encoding_.space().params.empty()) return Params();
    absl::StatusOr<Params> point;
    if (UsesPlainModel(request)) {
      TrainingData data = Collect(encoding_, request.history);
      if (request.trial_number < initial_design_ ||
          static_cast<int>(data.x.size() + data.prior_x.size()) < initial_design_ ||
          (data.valued == 0 && data.prior_y.empty())) {
        return initial_->Ask(request);
      }
      point = data.prior_x.empty() ? ModelPoint(request, std::move(data))
                                   : TransferPoint(request, std::move(data));
    } else {
      OutputData data = CollectOutputs(encoding_, request.history, objectives_, constraints_);
      if (request.trial_number < initial_design_ ||
          static_cast<int>(data.x.size()) < initial_design_ || data.valued_count == 0) {
        return initial_->Ask(request);
      }
      if (cost_aware_ && request.trial_number < CheapDesignEnd()) {
        absl::StatusOr<Params> cheap = CheapDesignPoint(request, data);
        if (cheap.ok()) return cheap;
      }
      point = OutputsModelPoint(request, std::move(data));
    }
    if (point.ok()) return point;
    // A model that cannot be fitted (which jitter makes very unlikely) degrades the search to
    // the space-filling design rather than stopping it.
    if (request.notes != nullptr) {
      request.notes->push_back(absl::StrCat("bayesian sampler: model failed (",
                                            point.status().message(), "); using a Sobol point"));
    }
    return initial_->Ask(request);
  }

 private:
  absl::StatusOr<Params> ModelPoint(const SampleRequest& request, TrainingData data);
  absl::StatusOr<Params> TransferPoint(const SampleRequest& request, TrainingData data);
  void Subsample(const SampleRequest& request, TrainingData& data);
  absl::StatusOr<Model> FitModel(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                 const std::vector<Eigen::VectorXd>& pending);
  absl::StatusOr<GpHyperparameters> FitHyperparameters(size_t slot, const Eigen::MatrixXd& x,
                                                       const Eigen::VectorXd& y);
  bool IsKnown(const Eigen::VectorXd& z, const std::vector<Eigen::VectorXd>& x,
               const std::vector<Eigen::VectorXd>& pending) const;

  // Several objectives, constraints or a cost model (see OutputsModelPoint below).
  bool UsesPlainModel(const SampleRequest& request) const;
  void SubsampleOutputs(const SampleRequest& request, OutputData& data);
  absl::StatusOr<GaussianProcess> FitOutput(size_t slot, const Eigen::MatrixXd& x,
                                            const Eigen::VectorXd& y);
  absl::StatusOr<Surrogates> FitSurrogates(const SampleRequest& request, const OutputData& data);
  absl::StatusOr<Params> OutputsModelPoint(const SampleRequest& request, OutputData data);
  int CheapDesignEnd() const;
  absl::StatusOr<Params> CheapDesignPoint(const SampleRequest& request, const OutputData& data);
  double CostExponent(const SampleRequest& request);

  const UnitEncoding encoding_;
  const std::unique_ptr<Sampler> initial_;
  const uint64_t seed_;
  const int initial_design_;
  const int max_observations_;
  const int objectives_;
  const int constraints_;
  const bool cost_aware_;
  const std::vector<double> reference_;  // minimised units; NaN or missing: derived
  const BayesianTuning tuning_;
  // The last fitted hyperparameters of each output (objectives, then constraints, then log
  // cost, then the warm start's prior model), the warm start of its next fit. Suggestions therefore
  // depend on the sequence of requests, as the Sampler contract allows.
  std::vector<std::optional<GpHyperparameters>> last_fits_;
  bool noted_subset_ = false;
  // cost_aware: the share of the budget the design used up (see CostExponent), known from the
  // first suggestion after it.
  std::optional<double> design_budget_used_;
};

// The share of the budget left, 1 - budget_used in [0, 1] (0 when it is not finite). The
// cost model counts while it is positive.
double BudgetLeft(const SampleRequest& request) {
  return std::isfinite(request.budget_used) ? std::clamp(1 - request.budget_used, 0.0, 1.0) : 0;
}

void BayesianSampler::Subsample(const SampleRequest& request, TrainingData& data) {
  const size_t total = data.x.size();
  if (!KeepSubset(data.x, data.y, static_cast<size_t>(max_observations_),
                  StreamSeed(seed_, total))) {
    return;
  }
  if (request.notes != nullptr && !noted_subset_) {
    request.notes->push_back(absl::StrCat(
        "bayesian sampler: fitting on a subset of ", max_observations_, " of ", total,
        " observations (the best half, the rest at random); raise max_observations to use "
        "more"));
    noted_subset_ = true;
  }
}

absl::StatusOr<GpHyperparameters> BayesianSampler::FitHyperparameters(size_t slot,
                                                                      const Eigen::MatrixXd& x,
                                                                      const Eigen::VectorXd& y) {
  const auto n = static_cast<int>(x.rows());
  // Output 0 keeps the seeds it had before there were other outputs.
  const uint64_t seed = slot == 0 ? seed_ : StreamSeed(seed_, 0x6a00 + slot);
  std::optional<GpHyperparameters>& last_fit = last_fits_[slot];
  GpFitOptions fit;
  fit.prior = tuning_.prior;
  fit.seed = StreamSeed(seed, static_cast<uint64_t>(n));
  fit.warm_start = last_fit;
  fit.tie = LengthscaleTie(encoding_);
  if (last_fit.has_value() && n > kColdFitLimit) fit.starts = 1;
  absl::StatusOr<GpHyperparameters> h;
  if (n <= kHyperparameterFitLimit) {
    h = FitGpHyperparameters(x, y, fit);
  } else {
    // A likelihood evaluation costs O(n³) and a fit takes a hundred or more, so the
    // hyperparameters come from a subset like Subsample's; the posterior still uses every
    // observation.
    const std::vector<size_t> keep =
        SubsetIndices(absl::Span<const double>(y.data(), y.size()), kHyperparameterFitLimit,
                      StreamSeed(StreamSeed(seed, 0x4f17), static_cast<uint64_t>(n)));
    Eigen::MatrixXd sx(keep.size(), x.cols());
    Eigen::VectorXd sy(keep.size());
    for (size_t i = 0; i < keep.size(); ++i) {
      sx.row(i) = x.row(keep[i]);
      sy[i] = y[keep[i]];
    }
    h = FitGpHyperparameters(sx, sy, fit);
  }
  if (h.ok()) last_fit = *h;
  return h;
}

absl::StatusOr<Model> BayesianSampler::FitModel(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                                const std::vector<Eigen::VectorXd>& pending) {
  SEXTANT_ASSIGN_OR_RETURN(GpHyperparameters h, FitHyperparameters(0, x, y));
  SEXTANT_ASSIGN_OR_RETURN(GaussianProcess gp, GaussianProcess::Fit(x, y, h));
  // The incumbent is the best posterior mean at an observation rather than the best value:
  // when the fit attributes part of the spread to noise (ripples the kernel cannot follow,
  // as on Ackley), the luckiest observation lies below anything the model expects nearby,
  // and expected improvement against it would only ever favour far-away, uncertain points.
  const double best = gp.Predict(x).mean.minCoeff();
  Model model{std::move(gp), best};
  if (pending.empty()) return model;
  const Eigen::MatrixXd at = ToMatrix(pending, encoding_.dimension());
  if (tuning_.pending == PendingStrategy::kConstantLiar) {
    Eigen::MatrixXd all_x(x.rows() + at.rows(), x.cols());
    all_x << x, at;
    Eigen::VectorXd all_y(y.size() + at.rows());
    all_y << y, Eigen::VectorXd::Constant(at.rows(), y.maxCoeff());
    SEXTANT_ASSIGN_OR_RETURN(model.gp, GaussianProcess::Fit(std::move(all_x), std::move(all_y), h));
    return model;
  }
  // Kriging believer: a pending trial is taken to return the model's own prediction, which
  // collapses the uncertainty, and so the expected improvement, around it. Believed values
  // can lower the incumbent, as they would if they came true.
  SEXTANT_ASSIGN_OR_RETURN(model.gp, model.gp.WithFantasies(at));
  model.best = std::min(model.best, model.gp.y().tail(at.rows()).minCoeff());
  return model;
}

bool BayesianSampler::IsKnown(const Eigen::VectorXd& z, const std::vector<Eigen::VectorXd>& x,
                              const std::vector<Eigen::VectorXd>& pending) const {
  const auto same = [&z](const Eigen::VectorXd& other) {
    return (other - z).squaredNorm() < 1e-20;
  };
  return std::any_of(x.begin(), x.end(), same) || std::any_of(pending.begin(), pending.end(), same);
}

absl::StatusOr<Params> BayesianSampler::ModelPoint(const SampleRequest& request,
                                                   TrainingData data) {
  Subsample(request, data);
  const Eigen::MatrixXd x = ToMatrix(data.x, encoding_.dimension());
  const Eigen::VectorXd y = WarpAndStandardize(
      Eigen::Map<const Eigen::VectorXd>(data.y.data(), static_cast<Eigen::Index>(data.y.size())),
      tuning_.warp);
  SEXTANT_ASSIGN_OR_RETURN(Model model, FitModel(x, y, data.pending));
  AcquisitionOptions acquisition = tuning_.acquisition;
  acquisition.seed = StreamSeed(seed_, static_cast<uint64_t>(request.trial_number));
  const Eigen::MatrixXd pending = ToMatrix(data.pending, encoding_.dimension());
  for (const ScoredPoint& candidate : MaximizeLogEi(
           model.gp, model.best, encoding_, BestRows(x, y, kAnchors), pending, acquisition)) {
    if (!IsKnown(candidate.z, data.x, data.pending)) return encoding_.Decode(candidate.z);
  }
  // Every candidate was tried already (a small discrete space): fall back to the design.
  return initial_->Ask(request);
}

// A warm-started search (search.warm_start) models its objective as the earlier runs' function
// plus a difference, f = f0 + c + δ, after the stacked residual GPs of Golovin et al. 2017
// (Google Vizier): a GP on the priors alone gives f0's posterior; c is the mean of this run's
// residuals y - E[f0], shrunk towards 0 as if the priors had one residual of 0; and a second,
// zero-mean GP fitted to what remains gives δ. Values are warped and standardised together,
// so both share one scale.
// - Until this run has a result, the prediction is f0's with δ's default variance added, so
//   the first suggestion goes where the earlier runs did best.
// - After that, the prediction's variance is δ's alone, with δ's fitted signal variance held
//   at kMinDeltaVariance or more: it is small where this run has looked, and far from its
//   trials it is the spread of the differences seen so far, so that a prior that keeps being
//   right keeps the search near it and one that is wrong sends it looking. Each own result
//   corrects the model near it while the priors still shape it elsewhere.
// A single GP on the pooled observations cannot do that: its 100 priors outvote the few new
// results that disagree with them, and on Branin with a shifted optimum it stayed at the old
// one. Adding f0's variance to δ's explored the corners far from the priors instead (three
// times the regret on Branin and eight on Hartmann6 in bench/warmstart). Without the floor,
// δ's variance fitted to one or two residuals collapses to nothing and the search repeats
// itself. Priors are subsampled like own observations, to max_observations.
absl::StatusOr<Params> BayesianSampler::TransferPoint(const SampleRequest& request,
                                                      TrainingData data) {
  Subsample(request, data);
  const auto dim = encoding_.dimension();
  KeepSubset(data.prior_x, data.prior_y, static_cast<size_t>(max_observations_),
             StreamSeed(seed_, 0x9a10));
  const auto n0 = static_cast<Eigen::Index>(data.prior_y.size());
  const auto n1 = static_cast<Eigen::Index>(data.y.size());
  Eigen::VectorXd pooled(n0 + n1);
  for (Eigen::Index i = 0; i < n0; ++i) pooled[i] = data.prior_y[static_cast<size_t>(i)];
  for (Eigen::Index i = 0; i < n1; ++i) pooled[n0 + i] = data.y[static_cast<size_t>(i)];
  const Eigen::VectorXd t = WarpAndStandardize(pooled, tuning_.warp);
  const Eigen::MatrixXd x0 = ToMatrix(data.prior_x, dim);
  const Eigen::VectorXd t0 = t.head(n0);
  SEXTANT_ASSIGN_OR_RETURN(
      GpHyperparameters h0,
      FitHyperparameters(static_cast<size_t>(objectives_ + constraints_ + 1), x0, t0));
  SEXTANT_ASSIGN_OR_RETURN(const GaussianProcess f0, GaussianProcess::Fit(x0, t0, h0));

  const Eigen::MatrixXd pending = ToMatrix(data.pending, dim);
  std::optional<GaussianProcess> delta;
  double offset = 0;  // c
  double best = f0.Predict(x0).mean.minCoeff();
  const Eigen::MatrixXd x1 = ToMatrix(data.x, dim);
  if (n1 > 0) {
    const Eigen::VectorXd base = f0.Predict(x1).mean;
    Eigen::VectorXd residual = t.tail(n1) - base;
    offset = residual.sum() / static_cast<double>(n1 + 1);
    residual.array() -= offset;
    SEXTANT_ASSIGN_OR_RETURN(GpHyperparameters h1, FitHyperparameters(0, x1, residual));
    h1.signal_variance = std::max(h1.signal_variance, kMinDeltaVariance);
    SEXTANT_ASSIGN_OR_RETURN(GaussianProcess gp, GaussianProcess::Fit(x1, residual, h1));
    // The incumbent is the best posterior mean at one of this run's own trials (see FitModel).
    best = (base + gp.Predict(x1).mean).minCoeff() + offset;
    if (pending.rows() > 0) {
      SEXTANT_ASSIGN_OR_RETURN(gp, gp.WithFantasies(pending));
    }
    delta.emplace(std::move(gp));
  }
  const Eigen::VectorXd& lengthscales =
      delta.has_value() ? delta->hyperparameters().lengthscales : h0.lengthscales;
  const double radius = tuning_.acquisition.repulsion_radius;
  const PointScorer score = [&](const Eigen::MatrixXd& points) {
    const GaussianProcess::Prediction p0 = f0.Predict(points);
    Eigen::VectorXd mean = p0.mean.array() + offset;
    Eigen::VectorXd variance = p0.variance.array() + kDefaultDeltaVariance;
    if (delta.has_value()) {
      const GaussianProcess::Prediction p1 = delta->Predict(points);
      mean += p1.mean;
      variance = p1.variance;
    }
    Eigen::VectorXd total(points.rows());
    for (Eigen::Index i = 0; i < points.rows(); ++i) {
      total[i] = LogExpectedImprovement(mean[i], std::sqrt(variance[i]), best) +
                 RepulsionPenalty(points.row(i).transpose(), pending, lengthscales, radius);
    }
    return total;
  };
  AcquisitionOptions acquisition = tuning_.acquisition;
  acquisition.seed = StreamSeed(seed_, static_cast<uint64_t>(request.trial_number));
  std::vector<Eigen::VectorXd> anchors;
  if (n1 > 0) anchors = BestRows(x1, t.tail(n1), kAnchors);
  for (Eigen::VectorXd& row : BestRows(x0, t0, kAnchors)) anchors.push_back(std::move(row));
  for (const ScoredPoint& candidate : MaximizeScore(score, encoding_, anchors, acquisition)) {
    if (!IsKnown(candidate.z, data.x, data.pending)) return encoding_.Decode(candidate.z);
  }
  return initial_->Ask(request);
}

// With several objectives, constraints or a cost model, the sampler fits one GP per
// objective and per constraint (and one on log cost) and maximises the sum of log
// acquisitions: log EHVI (several objectives) or log EI below the best feasible posterior
// mean (one), plus log P(feasible), minus α·E[log cost] with α cooled from 1 after the design
// to 0 with the budget spent (CArBO; see CostExponent), plus the repulsion from pending
// trials. Pending trials are kriging-believer fantasies in every model, and join the front
// EHVI is measured against when they are believed feasible.

bool BayesianSampler::UsesPlainModel(const SampleRequest& request) const {
  // At budget_used = 1 the cost exponent is 0 and cost-aware search is plain expected
  // improvement: the plain path then gives exactly its suggestions.
  return objectives_ == 1 && constraints_ == 0 && (!cost_aware_ || BudgetLeft(request) <= 0);
}

void BayesianSampler::SubsampleOutputs(const SampleRequest& request, OutputData& data) {
  const auto limit = static_cast<size_t>(max_observations_);
  KeepSubset(data.cost_x, data.log_cost, limit,
             StreamSeed(StreamSeed(seed_, 0xc057), data.cost_x.size()));
  const size_t total = data.x.size();
  if (total <= limit) return;
  data = SelectRows(std::move(data),
                    SubsetIndices(ImportanceKeys(data), limit, StreamSeed(seed_, total)));
  if (request.notes != nullptr && !noted_subset_) {
    request.notes->push_back(
        absl::StrCat("bayesian sampler: fitting on a subset of ", max_observations_, " of ", total,
                     " observations (the best in some objective first, the rest at random); raise "
                     "max_observations to use more"));
    noted_subset_ = true;
  }
}

absl::StatusOr<GaussianProcess> BayesianSampler::FitOutput(size_t slot, const Eigen::MatrixXd& x,
                                                           const Eigen::VectorXd& y) {
  SEXTANT_ASSIGN_OR_RETURN(GpHyperparameters h, FitHyperparameters(slot, x, y));
  return GaussianProcess::Fit(x, y, std::move(h));
}

// (v - mean) / sd of v, with the mean and sd (1 when v is constant).
struct Standardized {
  Eigen::VectorXd values;
  double mean = 0;
  double sd = 1;
};

Standardized Standardize(const Eigen::VectorXd& v) {
  Standardized out;
  out.mean = v.mean();
  const double sd = std::sqrt((v.array() - out.mean).square().mean());
  out.sd = sd > 0 ? sd : 1;
  out.values = (v.array() - out.mean) / out.sd;
  return out;
}

absl::StatusOr<Surrogates> BayesianSampler::FitSurrogates(const SampleRequest& request,
                                                          const OutputData& data) {
  const Eigen::MatrixXd x = ToMatrix(data.x, encoding_.dimension());
  const Eigen::MatrixXd pending = ToMatrix(data.pending, encoding_.dimension());
  const auto n = static_cast<Eigen::Index>(data.x.size());
  Surrogates s;
  s.y.resize(n, objectives_);
  for (int k = 0; k < objectives_; ++k) {
    Eigen::VectorXd column(n);
    for (Eigen::Index i = 0; i < n; ++i) column[i] = data.y[i][k];
    // Several objectives: standardised only. EHVI is measured in the GPs' output space, and
    // only a per-objective affine map leaves its ranking equal to that of hypervolume
    // improvement in the objectives' own units; a warp stretches the good end of every
    // objective, and on DTLZ2 (3 objectives) the tail-log warp made the search worse than
    // random at 50 trials.
    s.y.col(k) = WarpAndStandardize(column, objectives_ > 1 ? OutputWarp::kNone : tuning_.warp);
    if (k < static_cast<int>(reference_.size()) && std::isfinite(reference_[k])) {
      s.reference.push_back(WarpedValue(column, s.y.col(k), reference_[k]));
    } else {
      s.reference.push_back(std::numeric_limits<double>::quiet_NaN());
    }
    SEXTANT_ASSIGN_OR_RETURN(GaussianProcess gp, FitOutput(k, x, s.y.col(k)));
    if (objectives_ == 1) {
      // As in FitModel, the incumbent is a posterior mean, here the best at a feasible point.
      const Eigen::VectorXd mean = gp.Predict(x).mean;
      for (Eigen::Index i = 0; i < n; ++i) {
        if (data.feasible[i]) s.best = std::min(s.best.value_or(mean[i]), mean[i]);
      }
    }
    SEXTANT_ASSIGN_OR_RETURN(GaussianProcess believed, gp.WithFantasies(pending));
    s.objectives.push_back(std::move(believed));
  }
  const std::vector<double> derived = ReferencePoint(s.y);
  for (int k = 0; k < objectives_; ++k) {
    if (std::isnan(s.reference[k])) s.reference[k] = derived[k];
  }
  s.pending_feasible.assign(data.pending.size(), true);
  for (int j = 0; j < constraints_; ++j) {
    Eigen::VectorXd column(n);
    for (Eigen::Index i = 0; i < n; ++i) column[i] = data.violations[i][j];
    const Standardized v = Standardize(column);
    SEXTANT_ASSIGN_OR_RETURN(GaussianProcess gp, FitOutput(objectives_ + j, x, v.values));
    SEXTANT_ASSIGN_OR_RETURN(GaussianProcess believed, gp.WithFantasies(pending));
    const double threshold = -v.mean / v.sd;
    for (size_t p = 0; p < data.pending.size(); ++p) {
      const double believed_value = believed.y()[n + static_cast<Eigen::Index>(p)];
      s.pending_feasible[p] = s.pending_feasible[p] && believed_value <= threshold;
    }
    s.constraints.push_back({std::move(believed), threshold});
  }
  if (objectives_ == 1) {
    // Believed values can lower the incumbent, as in FitModel, when believed feasible.
    for (size_t p = 0; p < data.pending.size(); ++p) {
      const double believed_value = s.objectives[0].y()[n + static_cast<Eigen::Index>(p)];
      if (s.pending_feasible[p]) s.best = std::min(s.best.value_or(believed_value), believed_value);
    }
  }
  // A cost model needs costs that differ; until then cost-aware search is plain.
  if (cost_aware_ && BudgetLeft(request) > 0 && data.log_cost.size() >= 2) {
    const Standardized c = Standardize(Eigen::Map<const Eigen::VectorXd>(
        data.log_cost.data(), static_cast<Eigen::Index>(data.log_cost.size())));
    if (c.values.cwiseAbs().maxCoeff() > 0) {
      SEXTANT_ASSIGN_OR_RETURN(GaussianProcess gp,
                               FitOutput(objectives_ + constraints_,
                                         ToMatrix(data.cost_x, encoding_.dimension()), c.values));
      s.cost = CostModel{std::move(gp), c.mean, c.sd};
    }
  }
  return s;
}

std::vector<double> RowOf(const Eigen::MatrixXd& m, Eigen::Index row) {
  std::vector<double> out(static_cast<size_t>(m.cols()));
  for (Eigen::Index k = 0; k < m.cols(); ++k) out[k] = m(row, k);
  return out;
}

// The front EHVI improves on: every feasible observation and every pending trial believed
// feasible, at its believed values (the kriging believer for EHVI). EhviBoxes drops the
// dominated ones.
std::vector<std::vector<double>> FrontPoints(const Surrogates& s, const OutputData& data) {
  std::vector<std::vector<double>> points;
  const Eigen::Index n = s.y.rows();
  for (Eigen::Index i = 0; i < n; ++i) {
    if (data.feasible[i]) points.push_back(RowOf(s.y, i));
  }
  for (size_t p = 0; p < s.pending_feasible.size(); ++p) {
    if (!s.pending_feasible[p]) continue;
    std::vector<double> point;
    for (const GaussianProcess& gp : s.objectives) {
      point.push_back(gp.y()[n + static_cast<Eigen::Index>(p)]);
    }
    points.push_back(std::move(point));
  }
  return points;
}

// Where perturbed candidates start: the best feasible rows (one objective), or up to kAnchors
// points spread evenly along the observed feasible front (several); with nothing feasible,
// the rows closest to feasibility.
std::vector<Eigen::VectorXd> Anchors(const Surrogates& s, const OutputData& data) {
  const auto n = static_cast<size_t>(s.y.rows());
  std::vector<size_t> rows;
  if (s.y.cols() > 1) {
    std::vector<std::vector<double>> feasible;
    std::vector<size_t> index;
    for (size_t i = 0; i < n; ++i) {
      if (!data.feasible[i]) continue;
      feasible.push_back(RowOf(s.y, static_cast<Eigen::Index>(i)));
      index.push_back(i);
    }
    for (int f : ParetoFront(feasible)) rows.push_back(index[f]);
    std::stable_sort(rows.begin(), rows.end(),
                     [&s](size_t a, size_t b) { return s.y(a, 0) < s.y(b, 0); });
    if (rows.size() > kAnchors) {
      std::vector<size_t> spread;
      for (size_t a = 0; a < kAnchors; ++a) {
        spread.push_back(rows[a * (rows.size() - 1) / (kAnchors - 1)]);
      }
      rows = std::move(spread);
    }
  }
  if (rows.empty()) {
    // One objective, or nothing feasible: feasible rows by value, then the rest by total
    // violation.
    std::vector<double> violation(n, 0);
    for (size_t i = 0; i < n; ++i) {
      for (double v : data.violations[i]) violation[i] += std::max(v, 0.0);
    }
    rows.resize(n);
    std::iota(rows.begin(), rows.end(), 0);
    std::stable_sort(rows.begin(), rows.end(), [&](size_t a, size_t b) {
      if (data.feasible[a] != data.feasible[b]) return static_cast<bool>(data.feasible[a]);
      if (data.feasible[a]) return s.y(a, 0) < s.y(b, 0);
      return violation[a] < violation[b];
    });
    rows.resize(std::min(rows.size(), kAnchors));
  }
  std::vector<Eigen::VectorXd> anchors;
  for (size_t i : rows) anchors.push_back(data.x[i]);
  return anchors;
}

absl::StatusOr<Params> BayesianSampler::OutputsModelPoint(const SampleRequest& request,
                                                          OutputData data) {
  SubsampleOutputs(request, data);
  SEXTANT_ASSIGN_OR_RETURN(const Surrogates s, FitSurrogates(request, data));
  const Eigen::MatrixXd pending = ToMatrix(data.pending, encoding_.dimension());
  std::optional<EhviBoxes> boxes;
  if (objectives_ > 1) {
    std::vector<std::vector<double>> front = FrontPoints(s, data);
    // With nothing feasible yet, the search looks for feasibility alone, as with one objective.
    if (!front.empty()) boxes.emplace(front, s.reference);
  }
  const double exponent = cost_aware_ ? CostExponent(request) : 0;
  const double alpha = s.cost.has_value() ? exponent : 0;
  const Eigen::VectorXd& lengthscales = s.objectives[0].hyperparameters().lengthscales;
  const double radius = tuning_.acquisition.repulsion_radius;
  const PointScorer score = [&](const Eigen::MatrixXd& points) {
    Eigen::VectorXd total = LogProbabilityOfFeasibility(s.constraints, points);
    if (boxes.has_value()) {
      total += LogExpectedHypervolumeImprovement(s.objectives, *boxes, points);
    } else if (objectives_ == 1 && s.best.has_value()) {
      total += LogExpectedImprovements(s.objectives[0], *s.best, points);
    }
    if (alpha > 0) total -= alpha * PredictedLogCost(*s.cost, points);
    for (Eigen::Index i = 0; i < points.rows(); ++i) {
      total[i] += RepulsionPenalty(points.row(i).transpose(), pending, lengthscales, radius);
    }
    return total;
  };
  AcquisitionOptions acquisition = tuning_.acquisition;
  acquisition.seed = StreamSeed(seed_, static_cast<uint64_t>(request.trial_number));
  for (const ScoredPoint& candidate :
       MaximizeScore(score, encoding_, Anchors(s, data), acquisition)) {
    if (!IsKnown(candidate.z, data.x, data.pending)) return encoding_.Decode(candidate.z);
  }
  return initial_->Ask(request);
}

// CArBO's cost-effective initial design (Lee et al. 2020): the design continues past
// initial_design_ with points as spread as Sobol points but cheap. The first initial_design_
// points are plain Sobol points, whose costs fit the cost model; each later design point is
// the one of lowest predicted cost among an aligned block of kCheapBlock consecutive points
// of the same scrambled sequence (a block is itself spread over the space), so that the
// model learns the objective's shape where it costs little before expected improvement per
// dollar takes over. (EI per dollar otherwise spends its cheap trials on the cheap region's
// most uncertain corners, which cannot improve on a costly incumbent.) Measured on
// bench/multiobjective/cost_aware.py it saves the design's dollars but changes little else.
constexpr int kCheapBlock = 8;

int BayesianSampler::CheapDesignEnd() const { return 2 * initial_design_; }

// CArBO's cooling exponent (Lee et al. 2020, eq. 6): the share of the budget left after the
// design, (1 - budget_used) / (1 - u0) with u0 the budget_used when the design ended, so that
// the cost counts in full from the first suggestion after the design and not at all once the
// budget is spent. (1 - budget_used) alone starts below 1 by the design's share, 0.2 for 10
// of 50 trials; with CArBO's exponent the median dollars to plain EI's final best on the
// `moderate` problem of bench/multiobjective/cost_aware.py went from 0.54 to 0.46 of plain
// EI's in-process (80 seeds). u0 comes from the first suggestion past the design, taken as
// budget_used there scaled by CheapDesignEnd() / trial_number: exact for a trial budget, and
// for a cost budget when that suggestion is the first after the design (a resumed run's first
// suggestion may come later).
double BayesianSampler::CostExponent(const SampleRequest& request) {
  const double left = BudgetLeft(request);
  if (left <= 0) return 0;
  if (request.trial_number < CheapDesignEnd()) return 1;
  if (!design_budget_used_.has_value()) {
    const double at = static_cast<double>(std::max<int64_t>(request.trial_number, 1));
    design_budget_used_ = (1 - left) * std::min(1.0, static_cast<double>(CheapDesignEnd()) / at);
  }
  const double design_left = 1 - *design_budget_used_;
  return design_left > 0 ? std::min(1.0, left / design_left) : 0;
}

absl::StatusOr<Params> BayesianSampler::CheapDesignPoint(const SampleRequest& request,
                                                         const OutputData& data) {
  if (BudgetLeft(request) <= 0 || data.log_cost.size() < 2) {
    return absl::FailedPreconditionError("no cost model yet");
  }
  const Standardized c = Standardize(Eigen::Map<const Eigen::VectorXd>(
      data.log_cost.data(), static_cast<Eigen::Index>(data.log_cost.size())));
  if (!(c.values.cwiseAbs().maxCoeff() > 0)) {
    return absl::FailedPreconditionError("costs do not differ yet");
  }
  SEXTANT_ASSIGN_OR_RETURN(GaussianProcess gp,
                           FitOutput(objectives_ + constraints_,
                                     ToMatrix(data.cost_x, encoding_.dimension()), c.values));
  const int64_t first_block = (initial_design_ + kCheapBlock - 1) / kCheapBlock;
  const int64_t block = first_block + (request.trial_number - initial_design_);
  std::vector<Params> params;
  std::vector<Eigen::VectorXd> encoded;
  for (int j = 0; j < kCheapBlock; ++j) {
    SampleRequest at = request;
    at.trial_number = block * kCheapBlock + j;
    SEXTANT_ASSIGN_OR_RETURN(Params p, initial_->Ask(at));
    Eigen::VectorXd z = encoding_.Encode(p);
    if (IsKnown(z, data.x, data.pending)) continue;
    params.push_back(std::move(p));
    encoded.push_back(std::move(z));
  }
  if (params.empty()) return absl::FailedPreconditionError("every candidate was tried");
  const Eigen::VectorXd cost = gp.Predict(ToMatrix(encoded, encoding_.dimension())).mean;
  Eigen::Index cheapest = 0;
  cost.minCoeff(&cheapest);
  return params[static_cast<size_t>(cheapest)];
}

}  // namespace

std::unique_ptr<Sampler> NewBayesianSamplerWithTuning(SearchSpace space, BayesianOptions options,
                                                      BayesianTuning tuning) {
  return std::make_unique<BayesianSampler>(std::move(space), options, std::move(tuning));
}

}  // namespace internal

std::unique_ptr<Sampler> NewBayesianSampler(SearchSpace space, BayesianOptions options) {
  return internal::NewBayesianSamplerWithTuning(std::move(space), options,
                                                internal::BayesianTuning());
}

}  // namespace sextant
