#ifndef SEXTANT_AGGREGATOR_STAGING_LEASE_H_
#define SEXTANT_AGGREGATOR_STAGING_LEASE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sextant {

// Which sender holds a tier's one staging buffer (RoundCoordinator::Begin), and when it loses
// it to a sender that waits: once it has sent no chunk for stall_timeout, or has been staging
// longer in all than stall_timeout plus its size at min_floats_per_second, so that neither a
// stalled sender nor one trickling a value at a time can hold the round.
// Not thread-safe; FederationHub guards it with its mutex.
class StagingLease {
 public:
  StagingLease(absl::Duration stall_timeout, double min_floats_per_second);

  // client_id holds the buffer from `now`, for an update of total_size floats.
  void Grant(const std::string& client_id, size_t total_size, absl::Time now);
  // The holder sent a chunk at `now`.
  void Touch(absl::Time now) { active_ = now; }
  // The holder; empty when none.
  const std::string& holder() const { return holder_; }
  // The holder finished, failed or left: the buffer is free.
  void Release() { holder_.clear(); }
  // True when there is a holder and, at `now`, it stalled or trickles (see the class comment).
  bool Expired(absl::Time now) const;
  // Takes the buffer from an expired holder: released, and counted in cut_off().
  void CutOff();
  // Holders cut off so far.
  int64_t cut_off() const { return cut_off_; }
  // Why a sender that no longer holds the buffer is refused: Aborted, naming the limits.
  absl::Status CutOffError(const std::string& client_id) const;

 private:
  const absl::Duration stall_timeout_;
  const double min_floats_per_second_;
  std::string holder_;
  absl::Time began_;        // the holder's Grant
  absl::Time active_;       // its Grant or last chunk
  absl::Duration allowed_;  // how long its whole update may take
  int64_t cut_off_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_STAGING_LEASE_H_
