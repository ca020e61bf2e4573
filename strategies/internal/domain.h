#ifndef SEXTANT_STRATEGIES_INTERNAL_DOMAIN_H_
#define SEXTANT_STRATEGIES_INTERNAL_DOMAIN_H_

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "strategies/search_space.h"

namespace sextant::internal {

// True when spec is sampled in log space. Log scales need strictly positive bounds; a spec
// that violates that is treated as linear rather than producing NaNs.
inline bool UsesLog(const ParamSpec& spec) { return spec.log && spec.min > 0 && spec.max > 0; }

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

// Removes from params every parameter of space whose `when` conditions fail. Conditions may
// name other conditional parameters in any order, so removal repeats until nothing changes.
void DropInactive(const SearchSpace& space, Params& params);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_DOMAIN_H_
