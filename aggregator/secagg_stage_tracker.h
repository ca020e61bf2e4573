#ifndef SEXTANT_AGGREGATOR_SECAGG_STAGE_TRACKER_H_
#define SEXTANT_AGGREGATOR_SECAGG_STAGE_TRACKER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "federation/secagg_messages.h"

namespace sextant {

// The open stage of a SecAggHub round: which participants (by protocol index) it waits for,
// which answered, and when it may close. Stage 0 closes once every participant answered, or
// after the round's first deadline with enough keys in; stages 1..3 once every participant that
// was sent the stage's message answered, or stage_timeout_seconds after it opened (the late ones
// are dropped).
// Not thread-safe; SecAggHub guards it with its mutex.
class SecAggStageTracker {
 public:
  explicit SecAggStageTracker(double stage_timeout_seconds);

  // Stage 0's close rule for the round being opened: it may close first_deadline_seconds
  // (0: never) after it opened, once max(min_clients, 1, threshold) participants answered.
  void SetFirstStageRule(double first_deadline_seconds, int64_t min_clients, int64_t threshold);
  // Opens `stage` at `now` among n participants, waiting for those indexed in `expected` that
  // have not withdrawn from the round; none has answered it. Opening kAdvertiseKeys starts a
  // round: nobody has withdrawn.
  void Open(SecAggStage stage, size_t n, const std::vector<int32_t>& expected, absl::Time now);
  // Ends the round: the stage becomes `end` (kDone or kAborted).
  void End(SecAggStage end) { stage_ = end; }
  // The open stage; kDone or kAborted once the round ended, and kAborted before any round.
  SecAggStage stage() const { return stage_; }

  // Participant i answered the open stage.
  void MarkAnswered(int32_t i) { answered_[i] = true; }
  bool answered(int32_t i) const { return answered_[i]; }
  // Participant i withdrew from the round: neither the open stage nor any later one of the round
  // waits for it.
  void StopWaiting(int32_t i) {
    expected_[i] = false;
    withdrawn_[i] = true;
  }
  // True when the open stage may close at `now` (see the class comment).
  bool Ready(absl::Time now) const;

 private:
  const double stage_timeout_seconds_;
  SecAggStage stage_ = SecAggStage::kAborted;
  absl::Time opened_;
  double first_deadline_seconds_ = 0;
  int64_t first_quorum_ = 1;  // max(min_clients, 1, threshold)
  std::vector<bool> expected_;
  std::vector<bool> answered_;
  std::vector<bool> withdrawn_;  // this round's, by index
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_SECAGG_STAGE_TRACKER_H_
