#ifndef SEXTANT_STRATEGIES_INTERNAL_EHVI_H_
#define SEXTANT_STRATEGIES_INTERNAL_EHVI_H_

#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace sextant::internal {

// Expected hypervolume improvement (EHVI) of a point whose minimised objectives are predicted
// as independent Gaussians N(mean_k, sd_k²), against a front and a reference point.
//
// The region that improves on the front (below the reference and dominated by no front
// point) is cut into disjoint axis-aligned boxes once; then for any prediction
//   EHVI = Σ_boxes Π_k ∫_{l_k}^{u_k} Φ((z - mean_k)/sd_k) dz
//        = Σ_boxes Π_k sd_k·[h((u_k - mean_k)/sd_k) - h((l_k - mean_k)/sd_k)],
// h(t) = φ(t) + t·Φ(t) (Emmerich et al. 2006 and 2016; Yang et al. 2019), which is exact.
// The boxes come from slicing along the last objective and recursing on the points below
// each slice: one box per front point and one more for 2 objectives, O(m²) for 3 and O(m³)
// for 4. Immutable after construction, so its methods may run concurrently.
class EhviBoxes {
 public:
  // front: points of reference.size() objectives each (any order; dominated points and
  // points not strictly below the reference in every objective are ignored). reference must
  // be finite, with 1 to 4 objectives (more works but grows exponentially).
  EhviBoxes(const std::vector<std::vector<double>>& front, absl::Span<const double> reference);

  // log EHVI for the prediction (mean, sd), both of the reference's size. Accurate in log
  // space where EHVI itself underflows: deep inside the dominated region it is very
  // negative but finite (sd is clamped at 1e-12 from below). O(boxes) per call.
  double LogEhvi(absl::Span<const double> mean, absl::Span<const double> sd) const;

  // exp(LogEhvi(mean, sd)).
  double Ehvi(absl::Span<const double> mean, absl::Span<const double> sd) const;

  int objectives() const { return static_cast<int>(coordinates_.size()); }
  // The number of boxes in the decomposition (1 for an empty front).
  int boxes() const { return static_cast<int>(bounds_.size()) / (2 * objectives()); }

 private:
  void Decompose(std::vector<std::vector<double>> points, int dims, std::vector<int>& lower,
                 std::vector<int>& upper);
  void IndexPairs();
  double SlowLogSum(const std::vector<std::vector<double>>& log_side) const;
  int IndexOf(int objective, double value) const;

  // Per objective: -inf, every front coordinate, the reference; ascending and distinct.
  std::vector<std::vector<double>> coordinates_;
  // Per box: objectives() lower then objectives() upper indices into coordinates_.
  std::vector<int> bounds_;
  // Per objective: the distinct (lower, upper) index pairs of the boxes, so that each
  // side's integral is computed once per call; per box and objective, its pair's index.
  std::vector<std::vector<std::pair<int, int>>> pairs_;
  std::vector<int> box_pairs_;
};

}  // namespace sextant::internal

#endif  // SEXTANT_STRATEGIES_INTERNAL_EHVI_H_
