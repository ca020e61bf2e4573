#include "federation/weighted_average.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace sextant {

WeightedAverage::WeightedAverage(size_t d) : sum_(d, 0.0) {}

absl::Status WeightedAverage::Add(absl::Span<const float> update, double weight) {
  if (update.size() != sum_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("update has ", update.size(), " values, expected ", sum_.size()));
  }
  if (!std::isfinite(weight) || weight <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("weight must be finite and > 0, got ", weight));
  }
  // Check first so that a rejected update leaves the sum untouched.
  for (size_t i = 0; i < update.size(); ++i) {
    if (!std::isfinite(update[i])) {
      return absl::InvalidArgumentError(absl::StrCat("update has a non-finite value at ", i));
    }
  }
  for (size_t i = 0; i < update.size(); ++i) sum_[i] += weight * update[i];
  total_weight_ += weight;
  ++count_;
  return absl::OkStatus();
}

absl::Status WeightedAverage::Mean(absl::Span<float> out) const {
  if (count_ == 0) return absl::FailedPreconditionError("no updates were added");
  if (out.size() != sum_.size()) return absl::InvalidArgumentError("output has the wrong length");
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(sum_[i] / total_weight_);
  return absl::OkStatus();
}

}  // namespace sextant
