#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "strategies/internal/domain.h"
#include "strategies/sampler.h"
#include "strategies/search_space.h"

namespace sextant {
namespace {

constexpr int kDefaultFloatGridPoints = 5;

// The grid values of one parameter. Dense ranges of levels (every int, every step of a
// stepped float) are kept as levels rather than listed, since [0, 10^6] is a legal range even
// if a grid over it is a poor idea.
struct Axis {
  std::vector<ParamValue> values;
  const ParamSpec* spec = nullptr;  // set for a dense range
  internal::Levels levels{0, 1, 0};

  int64_t size() const {
    return spec != nullptr ? levels.count : static_cast<int64_t>(values.size());
  }
  ParamValue At(int64_t k) const {
    return spec != nullptr ? internal::LevelValue(*spec, levels, k) : values[k];
  }
};

// Position k of n evenly spaced points on [lo, hi], in log space when log is set; the
// endpoints are exact so that a grid always contains its bounds.
double Spaced(double lo, double hi, bool log, int k, int n) {
  if (k == 0 || n <= 1) return lo;
  if (k == n - 1) return hi;
  const double t = static_cast<double>(k) / (n - 1);
  if (log) return std::exp(std::log(lo) + t * (std::log(hi) - std::log(lo)));
  return lo + t * (hi - lo);
}

// grid_points evenly spaced levels, each the level nearest its even position.
Axis SpacedLevels(const ParamSpec& spec, const internal::Levels& levels) {
  const double last = static_cast<double>(levels.count - 1);
  std::vector<int64_t> ks;
  for (int k = 0; k < spec.grid_points; ++k) {
    ks.push_back(std::llround(Spaced(0, last, /*log=*/false, k, spec.grid_points)));
  }
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());  // spacing is monotone
  Axis axis;
  for (int64_t k : ks) axis.values.push_back(internal::LevelValue(spec, levels, k));
  return axis;
}

Axis LevelAxis(const ParamSpec& spec, const internal::Levels& levels) {
  if (spec.grid_points > 0) return SpacedLevels(spec, levels);
  Axis axis;
  axis.spec = &spec;
  axis.levels = levels;
  return axis;
}

Axis FloatAxis(const ParamSpec& spec) {
  if (std::optional<internal::Levels> levels = internal::LevelsOf(spec)) {
    return LevelAxis(spec, *levels);
  }
  const int n = spec.grid_points > 0 ? spec.grid_points : kDefaultFloatGridPoints;
  std::vector<double> xs;
  for (int k = 0; k < n; ++k) {
    xs.push_back(Spaced(spec.min, spec.max, internal::UsesLog(spec), k, n));
  }
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  Axis axis;
  axis.values.assign(xs.begin(), xs.end());
  return axis;
}

Axis IntAxis(const ParamSpec& spec) {
  if (std::optional<internal::Levels> levels = internal::LevelsOf(spec)) {
    return LevelAxis(spec, *levels);
  }
  // A log-scale int: all of its integers, or grid_points of them log-spaced.
  const auto [lo, hi] = internal::IntRangeOf(spec);
  if (spec.grid_points <= 0) return LevelAxis(spec, {static_cast<double>(lo), 1, hi - lo + 1});
  std::vector<int64_t> ks;
  for (int k = 0; k < spec.grid_points; ++k) {
    const double x = Spaced(static_cast<double>(lo), static_cast<double>(hi),
                            internal::UsesLog(spec), k, spec.grid_points);
    ks.push_back(std::clamp<int64_t>(std::llround(x), lo, hi));
  }
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());  // spacing is monotone
  Axis axis;
  axis.values.assign(ks.begin(), ks.end());
  return axis;
}

Axis CategoricalAxis(const ParamSpec& spec) {
  Axis axis;
  axis.values.assign(spec.values.begin(), spec.values.end());
  return axis;
}

Axis AxisFor(const ParamSpec& spec) {
  switch (spec.kind) {
    case ParamSpec::Kind::kFloat:
      return FloatAxis(spec);
    case ParamSpec::Kind::kInt:
      return IntAxis(spec);
    case ParamSpec::Kind::kCategorical:
      return CategoricalAxis(spec);
  }
  return FloatAxis(spec);
}

// The product of the axis sizes, saturating at INT64_MAX (a grid nobody will finish).
int64_t ProductSize(const std::vector<Axis>& axes) {
  int64_t total = 1;
  for (const Axis& axis : axes) {
    const int64_t n = axis.size();
    if (n == 0) return 0;
    if (total > std::numeric_limits<int64_t>::max() / n) {
      total = std::numeric_limits<int64_t>::max();
    } else {
      total *= n;
    }
  }
  return total;
}

class GridSampler final : public Sampler {
 public:
  explicit GridSampler(SearchSpace space) : space_(std::move(space)) {
    for (const ParamSpec& spec : space_.params) axes_.push_back(AxisFor(spec));
    total_ = ProductSize(axes_);
  }

  absl::StatusOr<Params> Ask(const SampleRequest& request) override {
    if (request.trial_number < 0) {
      return absl::InvalidArgumentError("trial_number must be >= 0");
    }
    const auto n = static_cast<size_t>(request.trial_number);
    // Trial n is the n-th distinct point, and points differing only in inactive parameters
    // are equal once those are left out, so the product is walked in order and the distinct
    // points remembered; asking for trials out of order therefore gives the same answers.
    while (points_.size() <= n && cursor_ < total_) {
      auto [it, inserted] = seen_.insert(Decode(cursor_++));
      if (inserted) points_.push_back(&*it);
    }
    if (n < points_.size()) return *points_[n];
    return absl::OutOfRangeError(
        absl::StrCat("the grid has ", points_.size(), " points; trial ", n, " is past its end"));
  }

 private:
  // Mixed-radix decoding with the last parameter as the fastest digit.
  Params Decode(int64_t index) const {
    Params full;
    for (size_t i = axes_.size(); i-- > 0;) {
      const int64_t n = axes_[i].size();
      full[space_.params[i].name] = axes_[i].At(index % n);
      index /= n;
    }
    internal::DropInactive(space_, full);
    return full;
  }

  const SearchSpace space_;
  std::vector<Axis> axes_;
  int64_t total_ = 0;
  int64_t cursor_ = 0;                 // next product index to decode
  std::set<Params> seen_;              // every distinct point found so far
  std::vector<const Params*> points_;  // the same points in trial order (nodes of seen_)
};

}  // namespace

std::unique_ptr<Sampler> NewGridSampler(SearchSpace space) {
  return std::make_unique<GridSampler>(std::move(space));
}

}  // namespace sextant
