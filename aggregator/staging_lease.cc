#include "aggregator/staging_lease.h"

#include "absl/strings/str_cat.h"

namespace sextant {

StagingLease::StagingLease(absl::Duration stall_timeout, double min_floats_per_second)
    : stall_timeout_(stall_timeout), min_floats_per_second_(min_floats_per_second) {}

void StagingLease::Grant(const std::string& client_id, size_t total_size, absl::Time now) {
  holder_ = client_id;
  active_ = began_ = now;
  allowed_ =
      stall_timeout_ + absl::Seconds(static_cast<double>(total_size) / min_floats_per_second_);
}

bool StagingLease::Expired(absl::Time now) const {
  return !holder_.empty() && (now - active_ >= stall_timeout_ || now - began_ >= allowed_);
}

void StagingLease::CutOff() {
  holder_.clear();
  ++cut_off_;
}

absl::Status StagingLease::CutOffError(const std::string& client_id) const {
  return absl::AbortedError(absl::StrCat(
      "the update of '", client_id, "' was cut off while another sender waited: no chunk for ",
      absl::FormatDuration(stall_timeout_), ", or slower in all than ",
      min_floats_per_second_ * sizeof(float) / (1 << 20), " MiB/s"));
}

}  // namespace sextant
