#ifndef SEXTANT_FEDERATION_WEIGHTED_AVERAGE_H_
#define SEXTANT_FEDERATION_WEIGHTED_AVERAGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace sextant {

// A streaming weighted mean over float vectors (FedAvg's combine step). Memory is O(d): each
// update is folded into the running sum as it arrives. Not thread-safe.
class WeightedAverage {
 public:
  // d is the vector length.
  explicit WeightedAverage(size_t d);

  // Adds weight * update to the running sum. Returns InvalidArgument for a wrong length, a
  // weight that is not finite and > 0, or an update holding NaN or Inf; the sum is then
  // unchanged.
  absl::Status Add(absl::Span<const float> update, double weight);

  // Writes sum / total weight into out (out.size() == d). FailedPrecondition when nothing was
  // added.
  absl::Status Mean(absl::Span<float> out) const;

  double total_weight() const { return total_weight_; }
  int64_t count() const { return count_; }

 private:
  std::vector<double> sum_;
  double total_weight_ = 0;
  int64_t count_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_WEIGHTED_AVERAGE_H_
