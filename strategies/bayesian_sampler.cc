#include <algorithm>
#include <cmath>
#include <cstdint>
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
#include "strategies/gaussian_process.h"
#include "strategies/internal/acquisition_optimizer.h"
#include "strategies/internal/bayesian_tuning.h"
#include "strategies/internal/output_transform.h"
#include "strategies/internal/splitmix.h"
#include "strategies/internal/unit_encoding.h"
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

// Observations as the model sees them.
struct TrainingData {
  std::vector<Eigen::VectorXd> x;  // encoded finished trials
  std::vector<double> y;           // their values; failures imputed as the worst value
  std::vector<Eigen::VectorXd> pending;
  int valued = 0;  // finished trials that reported a value
};

bool HasValue(const Observation& o) {
  return (o.outcome == Observation::Outcome::kCompleted ||
          o.outcome == Observation::Outcome::kPruned) &&
         o.value.has_value() && std::isfinite(*o.value);
}

TrainingData Collect(const UnitEncoding& encoding, absl::Span<const Observation> history) {
  TrainingData data;
  std::vector<Eigen::VectorXd> failed;
  for (const Observation& o : history) {
    if (o.outcome == Observation::Outcome::kPending) {
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
  if (data.valued == 0) return data;
  const double worst = *std::max_element(data.y.begin(), data.y.end());
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
                                                   : DefaultInitialDesign(space.params.size())),
        max_observations_(options.max_observations > 0 ? options.max_observations
                                                       : kDefaultMaxObservations),
        tuning_(std::move(tuning)) {}

  absl::StatusOr<Params> Ask(const SampleRequest& request) override {
    if (request.trial_number < 0) {
      return absl::InvalidArgumentError("trial_number must be >= 0");
    }
    if (encoding_.space().params.empty()) return Params();
    TrainingData data = Collect(encoding_, request.history);
    if (request.trial_number < initial_design_ ||
        static_cast<int>(data.x.size()) < initial_design_ || data.valued == 0) {
      return initial_->Ask(request);
    }
    absl::StatusOr<Params> point = ModelPoint(request, std::move(data));
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
  void Subsample(const SampleRequest& request, TrainingData& data);
  absl::StatusOr<Model> FitModel(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                 const std::vector<Eigen::VectorXd>& pending);
  absl::StatusOr<GpHyperparameters> FitHyperparameters(const Eigen::MatrixXd& x,
                                                       const Eigen::VectorXd& y);
  bool IsKnown(const Eigen::VectorXd& z, const TrainingData& data) const;

  const UnitEncoding encoding_;
  const std::unique_ptr<Sampler> initial_;
  const uint64_t seed_;
  const int initial_design_;
  const int max_observations_;
  const BayesianTuning tuning_;
  // The last fitted hyperparameters, the warm start of the next fit. Suggestions therefore
  // depend on the sequence of requests, as the Sampler contract allows.
  std::optional<GpHyperparameters> last_fit_;
  bool noted_subset_ = false;
};

void BayesianSampler::Subsample(const SampleRequest& request, TrainingData& data) {
  const size_t total = data.x.size();
  if (total <= static_cast<size_t>(max_observations_)) return;
  TrainingData subset;
  for (size_t i :
       SubsetIndices(data.y, static_cast<size_t>(max_observations_), StreamSeed(seed_, total))) {
    subset.x.push_back(std::move(data.x[i]));
    subset.y.push_back(data.y[i]);
  }
  subset.pending = std::move(data.pending);
  subset.valued = data.valued;
  data = std::move(subset);
  if (request.notes != nullptr && !noted_subset_) {
    request.notes->push_back(absl::StrCat(
        "bayesian sampler: fitting on a subset of ", max_observations_, " of ", total,
        " observations (the best half, the rest at random); raise max_observations to use "
        "more"));
    noted_subset_ = true;
  }
}

absl::StatusOr<GpHyperparameters> BayesianSampler::FitHyperparameters(const Eigen::MatrixXd& x,
                                                                      const Eigen::VectorXd& y) {
  const auto n = static_cast<int>(x.rows());
  GpFitOptions fit;
  fit.prior = tuning_.prior;
  fit.seed = StreamSeed(seed_, static_cast<uint64_t>(n));
  fit.warm_start = last_fit_;
  if (last_fit_.has_value() && n > kColdFitLimit) fit.starts = 1;
  absl::StatusOr<GpHyperparameters> h;
  if (n <= kHyperparameterFitLimit) {
    h = FitGpHyperparameters(x, y, fit);
  } else {
    // A likelihood evaluation costs O(n³) and a fit takes a hundred or more, so the
    // hyperparameters come from a subset like Subsample's; the posterior still uses every
    // observation.
    const std::vector<size_t> keep =
        SubsetIndices(absl::Span<const double>(y.data(), y.size()), kHyperparameterFitLimit,
                      StreamSeed(StreamSeed(seed_, 0x4f17), static_cast<uint64_t>(n)));
    Eigen::MatrixXd sx(keep.size(), x.cols());
    Eigen::VectorXd sy(keep.size());
    for (size_t i = 0; i < keep.size(); ++i) {
      sx.row(i) = x.row(keep[i]);
      sy[i] = y[keep[i]];
    }
    h = FitGpHyperparameters(sx, sy, fit);
  }
  if (h.ok()) last_fit_ = *h;
  return h;
}

absl::StatusOr<Model> BayesianSampler::FitModel(const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                                                const std::vector<Eigen::VectorXd>& pending) {
  SEXTANT_ASSIGN_OR_RETURN(GpHyperparameters h, FitHyperparameters(x, y));
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

bool BayesianSampler::IsKnown(const Eigen::VectorXd& z, const TrainingData& data) const {
  const auto same = [&z](const Eigen::VectorXd& other) {
    return (other - z).squaredNorm() < 1e-20;
  };
  return std::any_of(data.x.begin(), data.x.end(), same) ||
         std::any_of(data.pending.begin(), data.pending.end(), same);
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
    if (!IsKnown(candidate.z, data)) return encoding_.Decode(candidate.z);
  }
  // Every candidate was tried already (a small discrete space): fall back to the design.
  return initial_->Ask(request);
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
