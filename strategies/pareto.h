#ifndef SEXTANT_STRATEGIES_PARETO_H_
#define SEXTANT_STRATEGIES_PARETO_H_

#include <vector>

#include "absl/types/span.h"

namespace sextant {

// Multi-objective primitives. Every objective is minimised (callers negate maximised ones);
// a point is one value per objective, all points of one call the same length (1 to 4, more
// works but hypervolume grows exponentially). Pure functions; NaN is not allowed in input.

// True when a is no worse than b in every objective and better in at least one.
bool Dominates(absl::Span<const double> a, absl::Span<const double> b);

// Constraint domination (Deb 2002): a feasible point beats an infeasible one; of two
// infeasible points the one with the smaller total violation wins; of two feasible ones,
// Pareto dominance. violation_a/b: the sum of positive constraint violations (0 = feasible).
bool ConstrainedDominates(absl::Span<const double> a, double violation_a,
                          absl::Span<const double> b, double violation_b);

// Non-dominated sorting: the rank of every point (0 = the Pareto front, 1 = the front once
// rank 0 is removed, ...). Equal points share a rank. O(n log n) for two objectives.
// violations: empty, or one total violation per point (constraint domination).
std::vector<int> NonDominatedRanks(const std::vector<std::vector<double>>& points,
                                   absl::Span<const double> violations = {});

// Indices of the points of rank 0, in input order.
std::vector<int> ParetoFront(const std::vector<std::vector<double>>& points);

// Crowding distance (NSGA-II) of each point of `members` (indices into points, usually one
// front): the normalised perimeter of the cuboid formed by its neighbours; +inf for the
// extremes of each objective and for fronts of 1 or 2 points. In the order of members.
std::vector<double> CrowdingDistances(const std::vector<std::vector<double>>& points,
                                      absl::Span<const int> members);

// The hypervolume dominated by points and bounded by reference: the Lebesgue measure of
// { y : some p <= y <= reference }. Points not strictly better than reference in every
// objective contribute nothing; 0 when no point is. Exact: a sweep for 2 objectives
// (O(n log n)), a sweep over a 2-D front for 3 (O(n²) worst case), WFG beyond.
double Hypervolume(const std::vector<std::vector<double>>& points,
                   absl::Span<const double> reference);

// Each point's exclusive contribution: Hypervolume(all) - Hypervolume(all but that point).
// 0 for dominated points and for points outside the reference box.
std::vector<double> HypervolumeContributions(const std::vector<std::vector<double>>& points,
                                             absl::Span<const double> reference);

}  // namespace sextant

#endif  // SEXTANT_STRATEGIES_PARETO_H_
