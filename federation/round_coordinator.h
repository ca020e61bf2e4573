#ifndef SEXTANT_FEDERATION_ROUND_COORDINATOR_H_
#define SEXTANT_FEDERATION_ROUND_COORDINATOR_H_

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "federation/round_accumulator.h"
#include "federation/update_gate.h"

namespace sextant {

// Buffered asynchronous aggregation (FedBuff, Nguyen et al. 2022): instead of rounds that wait
// for their sampled clients, updates computed from any recent model version are buffered and
// applied once the buffer holds enough of them, each damped by its staleness s (the versions the
// model moved on since the one it was computed from).
struct BufferPolicy {
  enum class Weighting { kPolynomial, kConstant };
  bool enabled = false;       // Default: synchronous rounds.
  int64_t max_staleness = 4;  // S: a staler update is rejected (kStaleRound). Default 4.
  // kPolynomial: (1 + s)^-exponent; kConstant: 1. Default polynomial, exponent 0.5 (FedBuff's).
  Weighting weighting = Weighting::kPolynomial;
  double exponent = 0.5;
  // One update per sender per buffer: a client that delivered to the current buffer waits for
  // the next (a regional tier, so that a buffer's count never exceeds its clients). Default:
  // any number (the global tier, where a fast region may push twice into one buffer).
  bool distinct_senders = false;
  // The most clients that start training on one version (federation.clients_per_round under
  // mode: buffered); the hub that gives out the versions keeps it (FederationHub,
  // VersionStarts). Default 0: every client.
  int64_t starts_per_version = 0;
};

// The damping factor in (0, 1] of an update s >= 0 versions stale.
double StalenessFactor(const BufferPolicy& policy, int64_t staleness);

struct RoundCoordinatorOptions {
  std::string experiment_id;  // the only experiment accepted. Required.
  size_t model_size = 0;      // floats per update. Required (> 0).
  // After the deadline the round may close once updates standing for this many clients have
  // been accepted (an update's `count`: 1 for a client, its clients for a region). Default 1.
  int64_t min_updates = 1;
  double deadline_seconds = 0;  // from OpenRound. Default 0: wait for every participant.
  // Default: the streaming weighted mean (memory 2 x model size). A robust rule (median,
  // trimmed mean, Krum, Multi-Krum) needs every update of the round at once, so it keeps each
  // accepted update until Close: memory is O(participants x model size) for those rules. Robust
  // rules are unweighted, as in the literature; the outcome's total_weight is still the sum of
  // the accepted weights, so that an upper tier weights the region by its examples.
  AggregationRule rule;
  // Threads of the mean's fold of each update (WeightedAverage): a fold of a large model is
  // memory-bound, and one core alone cannot use the machine's bandwidth. Default 0: the
  // machine's hardware threads, at most 4.
  int fold_threads = 0;
  // Buffered mode: a round is a model version. OpenRound moves the version on and keeps the
  // buffer; updates of the last max_staleness versions are admitted (UpdateGate::SetBuffered);
  // each is folded with its weight damped by StalenessFactor (WeightedAverage::AddDamped), so
  // the buffer's mean is sum(f_i w_i u_i) / sum(w_i); the buffer may close once it holds updates
  // standing for min_updates clients (deadline and participants play no part). Needs the
  // weighted mean. Default off.
  BufferPolicy buffer;
  // Client-level differential privacy enforced where the updates arrive (central DP with
  // plaintext updates): every update is clipped to L2 norm clip_norm and counts with weight 1,
  // whatever its sender declared, clipped or added (a client that skipped its own clipping, or
  // the rounding of a compressed update), so that one client moves the round's sum by at most
  // clip_norm, as the accountant assumes. Counted in clipped_updates(). Default 0: off.
  double clip_norm = 0;
  // Large models: the update being received is staged in an unlinked file in staging_dir
  // (common/staging_buffer.h; nothing there bears a name) instead of
  // memory, and folded from it a chunk at a time (WeightedAverage::AddDampedRange), so that
  // memory is the mean plus O(chunk) instead of twice the model. Used when staging_dir is set
  // and model_size >= file_staging_from (default 2^26 floats, 256 MB). Not with a robust rule
  // (it keeps every update in memory). Default: in memory.
  std::string staging_dir;
  size_t file_staging_from = size_t{1} << 26;
  // Reproducible rounds: the weighted mean folds a round's (or a buffer's) accepted updates at
  // Close, in the order of their senders' ids, instead of as they arrive, and so do the
  // senders' metrics. A float sum depends on its order; this way the outcome depends only on
  // which updates came, not on when, and a run with the same seed and the same participants
  // gives the same model bit for bit (a paused and resumed trial the same as one never paused).
  // Keeps every accepted update until Close, as a robust rule does: memory O(participants x
  // model size). Not with file staging. Default off: each update folds as it arrives.
  bool ordered = false;
};

// One tier of a federated round: the global orchestrator over its regions, or a regional
// aggregator over its clients. It opens a round for its participants, takes their updates in
// chunks, and folds each completed update into a streaming weighted mean (WeightedAverage), so
// memory is one mean plus one staging buffer (2 x model size) however many participants there
// are: only one update is staged at a time (Begin returns Unavailable while another is being
// received; the transport waits, and gRPC's flow control holds the sender). An update is folded
// only once it is whole and every value is finite, so a bad chunk never reaches the mean.
// With a robust rule (options.rule) the accepted updates are kept instead and combined at Close.
// Not thread-safe; the transport serialises calls.
class RoundCoordinator {
 public:
  // InvalidArgument for an empty experiment id, model_size 0 or min_updates < 1.
  static absl::StatusOr<RoundCoordinator> Create(RoundCoordinatorOptions options, Clock* clock);
  RoundCoordinator(RoundCoordinator&&) = default;
  RoundCoordinator& operator=(RoundCoordinator&&) = default;

  // Opens `round` (above every earlier one) for the participants (non-empty) and starts a fresh
  // mean. Earlier rounds' updates become stale. InvalidArgument otherwise. Buffered: moves the
  // model version on to `round`, ends a drain (see Close) and keeps what is buffered.
  absl::Status OpenRound(int64_t round, std::vector<std::string> participants);

  // Replaces deadline_seconds and min_updates (>= 1) from the next OpenRound on.
  void SetCloseRule(double deadline_seconds, int64_t min_updates);
  // The open round's deadline counts from now instead of from OpenRound (its participants
  // were still starting when it opened). No effect when no round is open.
  void RestartDeadline();

  // Starts receiving an update of total_size floats standing for `count` clients.
  // Unavailable while another update is being staged (retry after Finish/Abandon of that one);
  // otherwise UpdateGate::Admit's errors (Aborted for another experiment, a stale, future or
  // duplicate round; FailedPrecondition when not a participant; InvalidArgument for a bad weight
  // or size), each counted against the sender.
  absl::Status Begin(const UpdateHeader& header, size_t total_size, int64_t count);
  // The next chunk of the sender's update, at `offset` (== floats received so far).
  // InvalidArgument for a gap, an overrun or NaN/Inf (the update is then dropped and counted);
  // Aborted when the round closed meanwhile; FailedPrecondition when nothing is in flight.
  absl::Status AddChunk(absl::string_view client_id, size_t offset, absl::Span<const float> values);
  // Completes the update: InvalidArgument when values are missing (dropped), else it is folded
  // into the round's mean. Errors as AddChunk.
  absl::Status Finish(absl::string_view client_id, const SenderMetrics& metrics = {});
  // Drops a partial update whose stream broke off; the sender may retry. Not a rejection.
  void Abandon(absl::string_view client_id);

  // A participant of the open (synchronous) round will send no update: the round stops waiting
  // for it. FailedPrecondition when no round is open, the mode is buffered, or client_id is
  // not a participant or has delivered already. Idempotent.
  absl::Status MarkFailed(absl::string_view client_id);
  // Participants of the open round marked failed and not delivered.
  int64_t failed_count() const;
  // Their ids.
  std::vector<std::string> failed() const;
  // True when the open round may close: every participant delivered or failed (Close then
  // refuses a round with no update: it failed), or the deadline passed and at least
  // min_updates clients are in.
  bool ReadyToClose() const;
  bool DeadlinePassed() const;
  // Closes the open round (later updates for it are stale). FailedPrecondition when no round is
  // open or nothing was accepted (the round cannot produce a mean).
  // Buffered: empties the buffer into the outcome instead; the version stays open, and the
  // buffer drains (Begin answers Unavailable, so senders wait) until the outcome's mean has been
  // used: the next OpenRound or ResumeBuffering.
  absl::StatusOr<RoundOutcome> Close();
  // Buffered: ends the drain of the last Close; the buffer starts afresh. No-op otherwise.
  void ResumeBuffering();
  // The last Close's mean will not be read again: its memory goes back to the system until the
  // next update is folded (WeightedAverage::Release), so that its owner can work on the model
  // meanwhile without holding both. The outcome's mean must not be read after this.
  void ReleaseOutcome() { accumulator_.Release(); }
  bool buffered() const { return options_.buffer.enabled; }

  const std::string& experiment_id() const { return options_.experiment_id; }
  int64_t round() const { return gate_.round(); }
  bool round_open() const { return gate_.round_open(); }
  const std::vector<std::string>& participants() const { return participants_; }
  int64_t accepted_count() const { return accumulator_.count(); }
  const UpdateGate& gate() const { return gate_; }
  // Rejections counted so far over all rounds and senders.
  int64_t total_rejections() const;
  // Updates that clip_norm scaled down so far (over all rounds).
  int64_t clipped_updates() const { return accumulator_.clipped(); }
  // Where updates are staged and folded, for memory checks (RoundAccumulator::staging_capacity,
  // RoundAccumulator::stages_in_file).
  const RoundAccumulator& accumulator() const { return accumulator_; }

 private:
  RoundCoordinator(RoundCoordinatorOptions options, Clock* clock);
  // Stops staging client_id's update when it is the one staged; returns status.
  absl::Status Drop(absl::string_view client_id, absl::Status status);
  // Forgets the round's (or the buffer's) updates, sums and counts.
  void ResetBuffer();

  RoundCoordinatorOptions options_;
  Clock* clock_;
  UpdateGate gate_;
  RoundAccumulator accumulator_;
  std::vector<std::string> participants_;
  std::set<std::string, std::less<>> failed_;  // of participants_ (MarkFailed)
  absl::Time opened_at_;
  bool draining_ = false;  // buffered: Close's outcome is in use
  // Buffered: the staged update finished during a drain and is folded, with these metrics,
  // when it ends.
  bool fold_pending_ = false;
  SenderMetrics pending_metrics_;
  int64_t rejected_at_open_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_ROUND_COORDINATOR_H_
