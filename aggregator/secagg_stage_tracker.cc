#include "aggregator/secagg_stage_tracker.h"

#include <algorithm>

namespace sextant {

SecAggStageTracker::SecAggStageTracker(double stage_timeout_seconds)
    : stage_timeout_seconds_(stage_timeout_seconds) {}

void SecAggStageTracker::SetFirstStageRule(double first_deadline_seconds, int64_t min_clients,
                                           int64_t threshold) {
  first_deadline_seconds_ = first_deadline_seconds;
  first_quorum_ = std::max<int64_t>(std::max<int64_t>(1, min_clients), threshold);
}

void SecAggStageTracker::Open(SecAggStage stage, size_t n, const std::vector<int32_t>& expected,
                              absl::Time now) {
  stage_ = stage;
  opened_ = now;
  expected_.assign(n, false);
  answered_.assign(n, false);
  if (stage == SecAggStage::kAdvertiseKeys || withdrawn_.size() != n) withdrawn_.assign(n, false);
  for (int32_t i : expected) expected_[i] = !withdrawn_[i];
}

bool SecAggStageTracker::Ready(absl::Time now) const {
  bool all = true;
  int64_t answered = 0;
  for (size_t i = 0; i < expected_.size(); ++i) {
    all = all && (!expected_[i] || answered_[i]);
    answered += answered_[i] ? 1 : 0;
  }
  if (all) return true;
  const double elapsed = absl::ToDoubleSeconds(now - opened_);
  if (stage_ == SecAggStage::kAdvertiseKeys) {
    // Closing with fewer than t keys would abort the round: wait for t at least.
    return first_deadline_seconds_ > 0 && elapsed >= first_deadline_seconds_ &&
           answered >= first_quorum_;
  }
  return elapsed >= stage_timeout_seconds_;
}

}  // namespace sextant
