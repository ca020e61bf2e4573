#ifndef SEXTANT_STRATEGIES_INTERNAL_MO_TPE_SPLIT_H_
#define SEXTANT_STRATEGIES_INTERNAL_MO_TPE_SPLIT_H_

#include <vector>

#include "absl/types/span.h"

namespace sextant::internal {

// Multi-objective TPE's split of observations, as Optuna 3.1's TPESampler. Points are
// objective vectors (minimised, finite), all of one length >= 2. Pure functions.

// Optuna's reference point for a set of points: per objective, the worst value pushed 10%
// further out (1.1x when positive, 0.9x when negative; 1e-12 where it is 0).
std::vector<double> MotpeReference(const std::vector<std::vector<double>>& points);

// MotpeReference(points) with each finite entry of `given` (a user's reference point; may be
// empty or shorter) in place of the derived one; the derived point alone when no point is
// strictly better than that in every objective (the given one would weigh nothing).
std::vector<double> MotpeReference(const std::vector<std::vector<double>>& points,
                                   absl::Span<const double> given);

// The indices of the n_below "good" points: whole non-dominated fronts in rank order, then
// from the first front that does not fit, a greedy hypervolume subset (each step adds the
// point adding the most hypervolume against that front's MotpeReference(front, reference);
// ties to the lower index). Sorted ascending. n_below is clamped to [0, points.size()].
std::vector<int> MotpeBelow(const std::vector<std::vector<double>>& points, int n_below,
                            absl::Span<const double> reference = {});

// The Parzen weights of the good points: each one's exclusive hypervolume contribution
// against their MotpeReference(below, reference), plus 1e-12, over the largest such value
// (so in (0, 1]). A single point gets 1; none, an empty vector.
std::vector<double> MotpeBelowWeights(const std::vector<std::vector<double>>& below,
                                      absl::Span<const double> reference = {});

// The greedy hypervolume subset of size k (1-1/e approximation of the HSSP) among
// candidates (indices into points), in the order chosen.
std::vector<int> GreedyHypervolumeSubset(const std::vector<std::vector<double>>& points,
                                         absl::Span<const int> candidates, int k,
                                         absl::Span<const double> reference);

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_MO_TPE_SPLIT_H_
