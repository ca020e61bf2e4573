#ifndef SEXTANT_STRATEGIES_INTERNAL_DOMAIN_H_
#define SEXTANT_STRATEGIES_INTERNAL_DOMAIN_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "strategies/search_space.h"

namespace sextant::internal {

// True when spec has a step that changes its values: any float step, an int step above 1.
inline bool HasStep(const ParamSpec& spec) {
  return spec.kind == ParamSpec::Kind::kInt ? spec.step > 1 : spec.step > 0;
}

// True when spec is sampled in log space. Log scales need strictly positive bounds; a spec
// that violates that is treated as linear rather than producing NaNs. A step's evenly spaced
// values take precedence over log (the loader refuses the two together).
inline bool UsesLog(const ParamSpec& spec) {
  return spec.log && spec.min > 0 && spec.max > 0 && !HasStep(spec);
}

// The integers an int parameter can take: those inside its (double) bounds. When no integer
// lies inside, the range holds ceil(min) alone.
struct IntRange {
  int64_t lo;
  int64_t hi;
  int64_t count() const { return hi - lo + 1; }
};

inline IntRange IntRangeOf(const ParamSpec& spec) {
  const auto lo = static_cast<int64_t>(std::ceil(spec.min));
  const auto hi = static_cast<int64_t>(std::floor(spec.max));
  return {lo, std::max(lo, hi)};
}

// The values of a numeric parameter sampled with equal mass each: origin + k * step for k in
// [0, count). Ints not on a log scale (step 1 unless given) and floats with a step have them.
struct Levels {
  double origin;
  double step;
  int64_t count;  // >= 1
};

// spec's levels, or nullopt for a categorical, a float without a step and a log-scale int.
std::optional<Levels> LevelsOf(const ParamSpec& spec);

// Level k of spec (clamped into [0, count)) as spec's value type: int64_t for an int, else a
// double, written with 15 significant digits so that a decimal grid prints as it was typed
// (0.1 + 2 * 0.1 is 0.3, not 0.30000000000000004) and never above spec.max.
ParamValue LevelValue(const ParamSpec& spec, const Levels& levels, int64_t k);

// The index of the level nearest to x, clamped into [0, count).
int64_t NearestLevel(const Levels& levels, double x);

// Removes from params every parameter of space whose `when` conditions fail. Conditions may
// name other conditional parameters in any order, so removal repeats until nothing changes.
void DropInactive(const SearchSpace& space, Params& params);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_DOMAIN_H_
