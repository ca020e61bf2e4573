#ifndef SEXTANT_FEDERATION_UPDATE_GATE_H_
#define SEXTANT_FEDERATION_UPDATE_GATE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sextant {

// What every federated update carries (STYLE rule 10).
struct UpdateHeader {
  std::string experiment_id;
  int64_t round = 0;
  std::string client_id;
  double num_examples = 0;  // the update's FedAvg weight
};

// Why an update was turned away.
enum class RejectReason {
  kWrongExperiment,  // Aborted
  kStaleRound,       // Aborted: an earlier round, or the current one after it closed
  kFutureRound,      // Aborted: a round that is not open yet
  kDuplicate,        // Aborted: the client already delivered an update this round
  kNotSampled,       // FailedPrecondition: the client was not sampled for this round
  kWrongShape,       // InvalidArgument
  kNonFinite,        // InvalidArgument: NaN or Inf
  kBadWeight,        // InvalidArgument: num_examples not finite and > 0
};
inline constexpr size_t kNumRejectReasons = 8;
absl::string_view RejectReasonName(RejectReason reason);

// Decides which updates of a round may be aggregated, and counts the ones turned away per client
// and per reason; the round goes on with the rest. Pure bookkeeping over headers and values, so
// that the transport stays a thin adapter: it calls Admit when an update's header arrives,
// CheckValues for each chunk, and Accept once the last chunk is in (or Check for a whole update
// at once). Not thread-safe; runs on the aggregator's loop.
class UpdateGate {
 public:
  // experiment_id is the only experiment accepted; model_size the expected update length.
  UpdateGate(std::string experiment_id, size_t model_size);

  // Opens `round` (which must be above every round opened before) for the given clients; an
  // empty list admits any client. Updates of earlier rounds become stale. InvalidArgument when
  // round does not increase.
  absl::Status OpenRound(int64_t round, absl::Span<const std::string> sampled_clients = {});

  // Closes the open round: later updates for it are stale.
  void CloseRound();

  // Buffered asynchronous mode (FedBuff), from now on: a round stands for the model version a
  // client trained from, and an update computed from any of the last max_staleness + 1 rounds
  // opened is admitted (an older one is kStaleRound). A round stays open until the next
  // OpenRound, which keeps the updates in flight. What is delivered is counted per buffer
  // (StartBuffer), not per round: with distinct_senders a client that already delivered to the
  // current buffer is answered Unavailable (not a rejection: it may send once the next buffer
  // starts); without, a client may deliver any number of updates per buffer. Either way one at
  // a time: a second while one is in flight is kDuplicate.
  void SetBuffered(int64_t max_staleness, bool distinct_senders);
  // Buffered: a new buffer starts; no client has delivered to it.
  void StartBuffer() { delivered_.clear(); }
  // Buffered: counts client_id as having delivered to the current buffer.
  void MarkDelivered(absl::string_view client_id) { delivered_.insert(std::string(client_id)); }
  bool buffered() const { return max_staleness_ >= 0; }
  // round() minus the update's round: how many versions the model moved on since the sender's.
  int64_t Staleness(int64_t update_round) const { return round_ - update_round; }

  // Checks a header: Aborted for another experiment, a stale or future round or a duplicate;
  // FailedPrecondition for a client that was not sampled; InvalidArgument for a bad weight or
  // declared_size != model size. On OK the client's update is in flight. Each rejection is
  // counted against header.client_id.
  absl::Status Admit(const UpdateHeader& header, size_t declared_size);

  // Checks one chunk of an admitted update for NaN/Inf. InvalidArgument (counted as kNonFinite,
  // and the update is dropped: later chunks get FailedPrecondition); Aborted (counted as
  // kStaleRound) when the round closed while the update was arriving; FailedPrecondition when
  // the client has no update in flight.
  absl::Status CheckValues(absl::string_view client_id, absl::Span<const float> chunk);

  // Completes an in-flight update: OK means it may be aggregated, and the client counts as having
  // delivered (a second update is a duplicate). Aborted and FailedPrecondition as CheckValues.
  absl::Status Accept(absl::string_view client_id);

  // Forgets an in-flight update whose transfer broke off (the sender may send it again); it is
  // not counted as a rejection. No-op when the client has none in flight.
  void Abandon(absl::string_view client_id);
  // Admit + CheckValues + Accept for an update that arrived whole.
  absl::Status Check(const UpdateHeader& header, absl::Span<const float> update);

  // Rejections counted so far (over all rounds).
  int64_t rejections(absl::string_view client_id, RejectReason reason) const;
  int64_t rejections(absl::string_view client_id) const;
  int64_t rejections(RejectReason reason) const;

  int64_t round() const { return round_; }
  bool round_open() const { return open_; }
  // Clients whose update for the current round was accepted.
  size_t accepted() const { return delivered_.size(); }
  bool delivered(absl::string_view client_id) const { return delivered_.contains(client_id); }

 private:
  absl::Status Reject(absl::string_view client_id, RejectReason reason, absl::Status status);
  absl::Status NotInFlight(absl::string_view client_id);

  std::string experiment_id_;
  size_t model_size_;
  int64_t round_ = -1;
  bool open_ = false;
  int64_t max_staleness_ = -1;  // >= 0: buffered mode
  bool distinct_senders_ = false;
  absl::flat_hash_set<std::string> sampled_;  // empty: any client
  absl::flat_hash_set<std::string> in_flight_;
  absl::flat_hash_set<std::string> cut_off_;  // in flight when the round closed
  absl::flat_hash_set<std::string> delivered_;
  absl::flat_hash_map<std::string, std::array<int64_t, kNumRejectReasons>> rejections_;
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_UPDATE_GATE_H_
