#ifndef SEXTANT_AGGREGATOR_FEDERATION_HUB_H_
#define SEXTANT_AGGREGATOR_FEDERATION_HUB_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "aggregator/change_notifier.h"
#include "aggregator/staging_lease.h"
#include "aggregator/version_starts.h"
#include "common/clock.h"
#include "common/wait_list.h"
#include "federation/round_coordinator.h"

namespace sextant {

// What one participant is told about a round.
struct RoundTask {
  enum class Kind { kWait, kTrain, kDone };
  Kind kind = Kind::kWait;
  int64_t round = -1;
  std::vector<std::string> participants;  // an aggregator's own clients this round
  double deadline_seconds = 0;
  int64_t min_updates = 1;
  uint64_t seed = 0;
  int64_t model_size = 0;
  // To an aggregator under secure aggregation: the round's quantiser bits (0: its own), and
  // with int8 updates each tensor's element count and range (SecAggQuantization).
  int quantizer_bits = 0;
  std::vector<int64_t> segments;
  std::vector<double> segment_clips;
};

// One accepted update's sender and its metrics (per-region reporting).
struct SenderReport {
  std::string client_id;
  double weight = 0;
  int64_t count = 0;
  SenderMetrics metrics;
  int64_t rejected = 0;  // an aggregator's own rejections of client updates this round
  double seconds = 0;    // from the round's Publish to the update's Finish (on the hub's clock)
  // An aggregator's timings of its clients (PushHeader::client_seconds).
  std::vector<std::pair<std::string, double>> client_seconds;
};

// One report per sender: a buffered server step may hold several pushes of one region, whose
// counts and rejections add up and whose metrics are averaged by weight (eval_* by
// eval_weight). In the order of the senders' ids.
std::vector<SenderReport> MergeBySender(const std::vector<SenderReport>& senders);

// A participant's failure as reported (ReportFailure): the round, who reported it (a client,
// or a region's aggregator relaying), who failed, and why.
struct FailureReport {
  int64_t round = 0;
  std::string reporter;
  std::string failed;
  std::string error;
};

// The open round as it stands, for its owner's messages.
struct RoundProgress {
  int64_t round = -1;
  int64_t participants = 0;
  int64_t delivered = 0;  // participants whose update was accepted
  int64_t failed = 0;     // participants reported failed (and not delivered)
  int64_t count = 0;      // clients behind the accepted updates
  bool deadline_passed = false;
};

// The most failure reports a hub keeps for its owner between two TakeFailures.
inline constexpr size_t kMaxPendingFailures = 4096;

// The thread-safe state behind one tier's FederationService: the round's global model (kept in a
// file and read back in chunks, so it is not held in memory), the tasks of the participants and
// the RoundCoordinator that folds their updates. The gRPC adapter calls it from its handler
// threads; the tier's owner (orchestrator or aggregator loop) publishes rounds and closes them.
// Thread-safe.
class FederationHub {
 public:
  // stall_timeout: an update being staged that sends no chunk for this long (on clock) loses
  // its staging buffer to the next sender that waits for it (see Begin). Default 5 s.
  // min_floats_per_second: nor may it take longer in all than stall_timeout plus its size at
  // this rate, however often it sends a chunk, so that a sender trickling a value at a time
  // cannot hold the buffer either. Default 2^18 floats (1 MiB) a second.
  // starts: buffered rounds, who of the callers of WaitForRound may start on each version
  // (VersionStarts). Default: every one.
  FederationHub(RoundCoordinator coordinator, Clock* clock,
                absl::Duration stall_timeout = absl::Seconds(5),
                double min_floats_per_second = 1 << 18, VersionStarts starts = VersionStarts());

  // Opens `round`: the model is read from model_path (model_size floats, native float32), and
  // tasks maps each participant to its task (kind kTrain is implied). Wakes waiting callers.
  // deadline_seconds and min_updates set the round's close rule (RoundCoordinator).
  absl::Status Publish(int64_t round, const std::string& model_path,
                       std::map<std::string, RoundTask> tasks, double deadline_seconds = 0,
                       int64_t min_updates = 1) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the experiment: every waiting and later caller gets kDone.
  void SetDone() ABSL_LOCKS_EXCLUDED(mu_);
  // This tier stops while the experiment goes on (its instance taken back, its process told to
  // stop): every waiting and later WaitForRound and Begin is answered Unavailable, so that a
  // client keeps asking and finds the replacement at the same address instead of ending.
  void SetStopping() ABSL_LOCKS_EXCLUDED(mu_);
  // The model's tensor element counts that the open round's tasks carry (RoundTask::segments):
  // an int8 update's segments must equal them. Empty when the round carries none.
  std::vector<int64_t> RoundSegments() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `wait` (on the real clock) for a round above after_round that includes client_id
  // and that client_id has not failed (RecordFailure: a replacement asking in the place of one
  // that left the round waits for the next round). Returns kWait on timeout, kDone when the
  // experiment ended. Aborted for another experiment; Unavailable once stopping (SetStopping).
  // Buffered, with places per version (VersionStarts): a client waits until it may start on the
  // newest version as well.
  absl::StatusOr<RoundTask> WaitForRound(const std::string& experiment_id,
                                         const std::string& client_id, int64_t after_round,
                                         absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  // Reads floats [offset, offset + out.size()) of round's model. Unavailable when the round was
  // replaced meanwhile (the caller asks again and gets the new one); DataLoss when the file is
  // short.
  absl::Status ReadModel(int64_t round, int64_t offset, absl::Span<float> out)
      ABSL_LOCKS_EXCLUDED(mu_);

  // RoundCoordinator's calls, serialised. Begin waits (up to `wait`) while another update is
  // being staged, then fails Unavailable. A staged update that has sent nothing for
  // stall_timeout, or has been staged longer than stall_timeout plus its size at
  // min_floats_per_second, is cut off meanwhile (counted in stalled_senders()): its buffer goes
  // to the waiting sender, and its own next AddChunk fails Aborted. Unavailable at once after
  // SetDone (a sender waiting for a buffered tier's next buffer learns the end).
  absl::Status Begin(const UpdateHeader& header, size_t total_size, int64_t count,
                     absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status AddChunk(const std::string& client_id, size_t offset, absl::Span<const float> v)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `rejected` (an aggregator's rejections this round) and client_seconds (its clients'
  // timings) are reported with the sender.
  absl::Status Finish(const std::string& client_id, double weight, int64_t count,
                      const SenderMetrics& metrics, int64_t rejected = 0,
                      std::vector<std::pair<std::string, double>> client_seconds = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  // A participant will send no update for the open round (FederationService.ReportFailure).
  // failed is reporter itself, or, at the global tier, one of the reporter region's sampled
  // clients (relayed: it counts only as news). A synchronous round stops waiting for a failed
  // participant (RoundCoordinator::MarkFailed); the report is kept for TakeFailures, once per
  // (round, failed). Aborted for another experiment or a round that is not open;
  // FailedPrecondition for one that takes no part or delivered already; ResourceExhausted
  // when kMaxPendingFailures reports wait.
  absl::Status RecordFailure(const std::string& experiment_id, int64_t round,
                             const std::string& reporter, const std::string& failed,
                             const std::string& error) ABSL_LOCKS_EXCLUDED(mu_);
  // The reports recorded since the last call, oldest first.
  std::vector<FailureReport> TakeFailures() ABSL_LOCKS_EXCLUDED(mu_);
  // The open round's participants, deliveries and failures.
  RoundProgress Progress() ABSL_LOCKS_EXCLUDED(mu_);
  // The open round's participants reported failed that delivered nothing; empty when no round
  // is open.
  std::vector<std::string> FailedParticipants() ABSL_LOCKS_EXCLUDED(mu_);
  // When the open round was published (the hub's clock).
  absl::Time published_at() ABSL_LOCKS_EXCLUDED(mu_);
  void Abandon(const std::string& client_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `wait` (on the real clock) until every one of `ids` has called WaitForRound
  // at least once since this hub was made, so that a participant still starting is not taken
  // for a dead one. Returns those of `ids` that have not (empty when all have).
  std::vector<std::string> WaitForContact(const std::vector<std::string>& ids, absl::Duration wait)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to `wait` (on the real clock) until every participant that ever called
  // WaitForRound has been answered kDone (after SetDone), so that none still asking finds the
  // server gone. True when all have.
  bool WaitUntilAllHeardDone(absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  // The open round's deadline counts from now (RoundCoordinator::RestartDeadline).
  void RestartDeadline() ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `wait` until the open round may close (RoundCoordinator::ReadyToClose).
  bool WaitReadyToClose(absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  // Closes the round. The outcome's mean stays valid until the next Publish; senders lists the
  // accepted updates. Errors as RoundCoordinator::Close.
  // Buffered (RoundCoordinatorOptions::buffer): empties the buffer instead; its mean stays valid,
  // and senders wait, until the next Publish or ResumeBuffering. A Publish then moves the model
  // version on without cutting off updates in flight.
  absl::StatusOr<RoundOutcome> Close(std::vector<SenderReport>* senders) ABSL_LOCKS_EXCLUDED(mu_);
  // Buffered: the last Close's outcome has been used; the next buffer fills. No-op otherwise.
  void ResumeBuffering() ABSL_LOCKS_EXCLUDED(mu_);
  // The last Close's mean will not be read again (RoundCoordinator::ReleaseOutcome).
  void ReleaseOutcome() ABSL_LOCKS_EXCLUDED(mu_);

  int64_t total_rejections() ABSL_LOCKS_EXCLUDED(mu_);
  // Senders cut off for stalling mid-update (see Begin).
  int64_t stalled_senders() ABSL_LOCKS_EXCLUDED(mu_);
  int64_t rejections(const std::string& client_id) ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& experiment_id() const { return experiment_id_; }
  // SetDone has been called.
  bool done() ABSL_LOCKS_EXCLUDED(mu_);
  // Where the service parks the calls that wait on this hub (a round, a stage, a staging
  // buffer): every change that may answer one wakes them.
  WaitList& waiters() { return notifier_.waiters(); }

 private:
  ChangeNotifier notifier_;  // first: destroyed last, after whatever parks on it
  absl::Mutex mu_;
  Clock* clock_;
  RoundCoordinator coordinator_ ABSL_GUARDED_BY(mu_);
  std::string experiment_id_;
  int64_t round_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time published_at_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::string model_path_ ABSL_GUARDED_BY(mu_);
  int64_t model_size_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, RoundTask> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<SenderReport> senders_ ABSL_GUARDED_BY(mu_);
  std::vector<FailureReport> failures_ ABSL_GUARDED_BY(mu_);  // not yet taken
  std::set<std::string> failed_this_round_ ABSL_GUARDED_BY(mu_);
  VersionStarts starts_ ABSL_GUARDED_BY(mu_);
  // Every caller of WaitForRound so far (bounded).
  std::set<std::string> contacted_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> heard_done_ ABSL_GUARDED_BY(mu_);  // of contacted_
  // Who holds the coordinator's staging buffer, and when a waiting sender may take it.
  StagingLease lease_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_FEDERATION_HUB_H_
