#ifndef SEXTANT_FEDERATION_ROBUST_AGGREGATION_H_
#define SEXTANT_FEDERATION_ROBUST_AGGREGATION_H_

#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sextant {

// Byzantine-robust aggregation rules for the tier where client updates are in the clear (they
// cannot run under secure aggregation, which hides individual updates). Each takes n updates of
// equal length d, unweighted as in the literature, and expects finite values (UpdateGate checks
// them on arrival). All return InvalidArgument when there are no updates, when the updates or
// out differ in length, or when the rule's own parameter is out of range; out is then unchanged.
// Memory beyond the output is O(n) for the coordinate rules and O(n^2) for Krum.

// Coordinate-wise median: out[j] is the median of updates[0..n)[j]; for even n, the mean of the
// two middle values (as numpy.median).
absl::Status CoordinateMedian(absl::Span<const absl::Span<const float>> updates,
                              absl::Span<float> out);

// Coordinate-wise trimmed mean (Yin et al. 2018): per coordinate, drop the floor(beta * n)
// smallest and the floor(beta * n) largest values and average the rest. beta in [0, 0.5), and at
// least one value must remain.
absl::Status TrimmedMean(absl::Span<const absl::Span<const float>> updates, double beta,
                         absl::Span<float> out);

// Multi-Krum (Blanchard et al. 2017) with f Byzantine clients: the score of update i is the sum
// of squared Euclidean distances to its n - f - 2 nearest other updates; the m updates with the
// lowest scores (ties: lower index first) are selected and their plain mean is written to out.
// Requires n >= 2f + 3 and 1 <= m <= n. Returns the selected indices, best score first.
absl::StatusOr<std::vector<size_t>> MultiKrum(absl::Span<const absl::Span<const float>> updates,
                                              size_t f, size_t m, absl::Span<float> out);

// Krum: Multi-Krum with m = 1, i.e. out is a copy of the single best-scored update, whose index
// is returned.
absl::StatusOr<size_t> Krum(absl::Span<const absl::Span<const float>> updates, size_t f,
                            absl::Span<float> out);

// The Krum scores themselves (score[i] as above), for inspection and tests. Same requirements.
absl::StatusOr<std::vector<double>> KrumScores(absl::Span<const absl::Span<const float>> updates,
                                               size_t f);

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_ROBUST_AGGREGATION_H_
