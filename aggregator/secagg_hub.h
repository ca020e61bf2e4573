#ifndef SEXTANT_AGGREGATOR_SECAGG_HUB_H_
#define SEXTANT_AGGREGATOR_SECAGG_HUB_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "aggregator/change_notifier.h"
#include "aggregator/secagg_stage_tracker.h"
#include "common/clock.h"
#include "common/mapped_floats.h"
#include "common/staging_buffer.h"
#include "common/wait_list.h"
#include "federation/round_coordinator.h"
#include "federation/secagg_config.h"
#include "federation/secagg_messages.h"
#include "federation/secagg_server.h"
#include "federation/secure_quantizer.h"

namespace sextant {

// How clients encode their update for the round (SecureQuantizerOptions; max_clients is n).
struct SecAggQuantization {
  double clip = 1.0;       // per-coordinate clip of the update; default 1
  int bits = 16;           // quantiser bits; default 16
  int64_t max_weight = 1;  // client weights are clamped to [1, max_weight]; default 1
  // Per-tensor ranges (int8 updates): each segment of the update clips to its own range in
  // place of `clip` (SecureQuantizerOptions). Default empty: `clip` everywhere.
  std::vector<int64_t> segments;
  std::vector<double> segment_clips;
};

// The quantiser of a round in a ring_bits ring whose sums hold up to max_clients inputs.
// SecureQuantizer::Create's errors.
absl::StatusOr<SecureQuantizer> MakeQuantizer(const SecAggQuantization& q, int64_t max_clients,
                                              int ring_bits);

// What a client needs to start its side of a round: the public config and its index in it.
struct SecAggRoundStart {
  SecAggConfig config;
  int32_t client_index = 0;
  SecAggQuantization quantization;
  // Buffered rounds: the client multiplies its update by this staleness damping, in (0, 1],
  // before encoding it (StalenessFactor). Default 1.
  double update_scale = 1;
};

// A client waiting for a buffered round's next SecAgg instance (SecAggHub::Join).
struct SecAggJoiner {
  std::string client_id;
  int64_t base_version = 0;  // the model version its update was trained on
  absl::Time joined;         // its first Join for this update (the hub's clock)
};

// The aggregator's message that opens a stage for one client. Exactly one of the optionals is
// set when the stage is open for it; none when pending (not open yet) or aborted.
// Who advertised a directory entry's keys, and their signature (rpc/key_signer.h).
struct PeerAttestation {
  std::string client_id;
  std::string certificate_pem;
  std::string signature;  // empty without TLS
};

struct SecAggDownlink {
  SecAggStage stage = SecAggStage::kAdvertiseKeys;  // the stage asked for, or kAborted
  bool pending = false;
  std::optional<SecAggRoundStart> start;              // stage 0
  std::optional<SecAggKeyDirectory> directory;        // stage 1
  std::vector<PeerAttestation> attestations;          // stage 1: one per directory peer
  std::optional<SecAggShareDelivery> delivery;        // stage 2
  std::optional<SecAggUnmaskRequest> unmask_request;  // stage 3
};

// A finished round: the sum of the contributors' encodings, mod 2^ring_bits (the last element is
// their total weight), and their scalar metrics folded by eval weight.
struct SecAggRoundOutcome {
  int64_t round = 0;
  SecAggConfig config;
  SecAggQuantization quantization;
  RingVector sum;
  std::vector<std::string> contributors;  // client ids, sorted
  SenderMetrics metrics;
  // Sums over the contributors of what each said in the clear with its masked input: the
  // clients behind it (1 for a client; a region's clients in the regional layer) and the
  // updates it rejected.
  int64_t count = 0;
  int64_t rejected = 0;
  // Each participant's seconds from Open to its keys (a client sends them once it has trained;
  // federation.client_selection), or, for one that sent none, the time the round took.
  std::vector<std::pair<std::string, double>> client_seconds;
};

// A finished SecAgg round's weighted mean, decoded into *mean (model_size floats, made only as
// the decode writes them while the sum's memory goes back: never both whole), as the outcome
// of out.round: its senders the contributors, its count the clients behind them (out.count),
// its weight and metrics the sum's. max_clients: the most inputs the sum may hold (the
// quantiser's headroom). ResourceExhausted without memory for the mean; the quantiser's
// errors. Both tiers close a secure round through it.
absl::StatusOr<RoundOutcome> DecodeSecureRound(SecAggRoundOutcome& out, int64_t max_clients,
                                               size_t model_size, LazyFloats* mean);

struct SecAggHubOptions {
  std::string experiment_id;  // the only experiment accepted. Required.
  // Stages 1..3 close when every client that was sent the stage's message answered, or this long
  // after the stage opened (the late ones are dropped). Default 30.
  double stage_timeout_seconds = 30;
  double dropout_rate = 0.1;  // expected dropouts, for ChooseSecAggGraph; default 0.1
  SecAggQuantization quantization;
  // Masked inputs the transport may assemble at once (TakeStaging): the aggregator's memory
  // stays O(d) however many clients send together. Default 2.
  int max_staged_inputs = 2;
  // Where masked inputs are assembled: files in this folder (unlinked; their pages in the page
  // cache, not in the aggregator's memory), so that the aggregator holds only the sum; empty
  // (default): in memory.
  std::string staging_dir;
  // The ring holds the sum of this many clients at least (0: the round's participants). A
  // region whose sum goes on to the regional layer sizes its ring for every client of the run,
  // so that the regions' total cannot overflow either.
  int64_t ring_clients = 0;
  // Buffered rounds: the most clients that may wait for an instance at once (Join); more are
  // turned away (ResourceExhausted). Default 4096.
  size_t max_joiners = 4096;
};

// The secure-aggregation side of a regional aggregator: a SecAggServer per round, the mapping
// from client ids to protocol indices, the messages waiting for each client, and the stage
// deadlines on the injected clock. The gRPC adapter (FederationServiceImpl) calls Await and
// Submit* from its handler threads; the aggregator loop opens rounds and calls Advance (or
// WaitAndAdvance), which closes a stage once every expected client answered or its deadline
// passed, so that dropouts at any stage are recovered and the round proceeds with the survivors
// (or aborts, unmasking nothing, when fewer than t remain).
//
// Errors for the transport: another experiment, or a round that is not the open one, is
// Aborted; a client that is not in the round, or was dropped at an earlier stage, is
// FailedPrecondition; everything else is SecAggServer's (Aborted for a stage other than the open
// one, a duplicate or replay; InvalidArgument for a malformed message). A rejected message
// changes nothing.
// Thread-safe.
class SecAggHub {
 public:
  SecAggHub(SecAggHubOptions options, Clock* clock);

  // Opens `round` (above every earlier one) for `participants` (distinct client ids; a client's
  // index is its position in sorted order) with vectors of model_size + 1 ring elements. Stage 0
  // closes when every participant advertised keys, or once first_deadline_seconds (0: never)
  // passed with at least max(min_clients, t) in. InvalidArgument for a bad round or settings (no
  // ring fits n and the quantisation).
  absl::Status Open(int64_t round, std::vector<std::string> participants, size_t model_size,
                    uint64_t graph_seed, double first_deadline_seconds, int64_t min_clients)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same with a given protocol config (e.g. RegionalLayerConfig for the regions' round):
  // config.num_clients must equal the number of participants.
  absl::Status OpenWithConfig(std::vector<std::string> participants, SecAggConfig config,
                              double first_deadline_seconds, int64_t min_clients)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Buffered rounds (federation.mode: buffered): each buffer of updates is one SecAgg instance
  // among the clients that fill it. OpenBuffer opens instance `round` (above every earlier one)
  // for the waiting clients in `scales` (Join; each with its update's staleness damping in
  // (0, 1]), exactly as Open would for them with no first deadline beyond the stage timeout.
  // InvalidArgument as Open, or for a client that is not waiting or a scale outside (0, 1].
  absl::Status OpenBuffer(int64_t round, const std::map<std::string, double>& scales,
                          size_t model_size, uint64_t graph_seed, int64_t min_clients)
      ABSL_LOCKS_EXCLUDED(mu_);
  // client_id, holding an update trained on model version base_version, waits up to `wait`
  // (real time) to be taken into an instance; then it gets that instance's start as Await's
  // stage 0 would, with update_scale set. Pending on timeout: it keeps its place in line and asks
  // again. Aborted with the reason when it was turned away (Refuse) or the experiment is done;
  // ResourceExhausted when max_joiners wait already. Aborted for another experiment. A client
  // taken into the open instance that has not sent its keys gets that instance's start again.
  absl::StatusOr<SecAggDownlink> Join(const std::string& experiment_id,
                                      const std::string& client_id, int64_t base_version,
                                      absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to `wait` (real time) until at least `count` clients wait that asked within
  // `fresh` (on the hub's clock; a client gone silent is dropped from the line). Returns those
  // that wait, longest-waiting first.
  std::vector<SecAggJoiner> AwaitJoiners(size_t count, absl::Duration fresh, absl::Duration wait)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A transport that parks a Join call between tries of zero wait keeps client_id in line,
  // however long it stays parked: HoldJoin(id, +1) when the call first parks, HoldJoin(id, -1)
  // when it ends. A held client is never taken for gone by AwaitJoiners.
  void HoldJoin(const std::string& client_id, int delta) ABSL_LOCKS_EXCLUDED(mu_);
  // Turns a waiting client away: its Join answers Aborted naming `reason`. Counted as a
  // rejection. No-op for a client that is not waiting.
  void Refuse(const std::string& client_id, const std::string& reason) ABSL_LOCKS_EXCLUDED(mu_);

  // A participant of the open round goes no further in it (its training failed, it refused the
  // key directory it was given, or it was stopped by a spot notice): the open stage, and every
  // later stage of the round, stops waiting for it, as for a dropout at the stage's deadline.
  // No-op for another experiment or round, or a client not in it.
  void Withdraw(const std::string& experiment_id, int64_t round, const std::string& client_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the experiment: every waiting caller is answered (aborted) and later rounds refused.
  void SetDone() ABSL_LOCKS_EXCLUDED(mu_);
  // The quantisation of the rounds opened from now on, in place of options.quantization (a
  // round keeps the one it opened with): e.g. int8 ranges sized from the last round.
  void SetQuantization(SecAggQuantization quantization) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits up to `wait` (real time) until `stage` opens for client_id and returns its message;
  // pending on timeout; stage kAborted when the round aborted. Errors as above.
  absl::StatusOr<SecAggDownlink> Await(const std::string& experiment_id, int64_t round,
                                       SecAggStage stage, const std::string& client_id,
                                       absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  // The open round's config, for the transport to assemble client_id's masked input (its
  // vector_length and ring_bits). Errors as above (checked before any chunk is stored).
  absl::StatusOr<SecAggConfig> RoundConfig(const std::string& experiment_id, int64_t round,
                                           const std::string& client_id) ABSL_LOCKS_EXCLUDED(mu_);

  // One client message. The header's experiment, round and stage come from the wire; its sender
  // and recipient are set here from client_id. Errors as above.
  // SubmitKeys keeps the keys' attestation (empty without TLS) to relay with them in each
  // neighbour's directory (SecAggDownlink::attestations).
  // check (when given) vets the attestation against the sender's index in the round before the
  // keys are taken; its error is the call's (counted as a rejection).
  absl::Status SubmitKeys(const std::string& client_id, SecAggAdvertiseKeys message,
                          PeerAttestation attestation = {},
                          const std::function<absl::Status(int32_t index)>& check = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SubmitShares(const std::string& client_id, SecAggShareKeys message)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Adds the masked input of `header`'s experiment, round and stage, read a chunk at a time by
  // `read` (SecAggServer::HandleMaskedInput), to the round's sum.
  absl::Status SubmitMasked(const std::string& client_id, SecAggHeader header,
                            const SecAggServer::MaskedInputReader& read,
                            const SenderMetrics& metrics, int64_t count = 1, int64_t rejected = 0)
      ABSL_LOCKS_EXCLUDED(mu_);

  // A buffer of `bytes` bytes to assemble a masked input in (in a file in staging_dir, or in
  // memory), from a pool of at most max_staged_inputs: waits up to `wait` (real time) for one to
  // be free. Unavailable when none freed in time (the caller retries, or gives up when its stream
  // is cancelled) or no staging file can be made; Aborted once the experiment is done. Its
  // contents are stale: the caller overwrites every byte. Give it back with ReturnStaging.
  absl::StatusOr<StagingBuffer> TakeStaging(size_t bytes, absl::Duration wait)
      ABSL_LOCKS_EXCLUDED(mu_);
  void ReturnStaging(StagingBuffer buffer) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SubmitReveal(const std::string& client_id, SecAggUnmaskResponse message)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Closes the open stage when it is ready (see the class comment) and returns the stage open
  // afterwards (kDone or kAborted at the end of a round; kAborted also when no round is open).
  SecAggStage Advance() ABSL_LOCKS_EXCLUDED(mu_);
  // Calls Advance until the round ends (returns true) or `wait` passes (false).
  bool WaitAndAdvance(absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  // The finished round's outcome (moved out: call once). FailedPrecondition while the round
  // runs; Aborted with the reason when it aborted.
  absl::StatusOr<SecAggRoundOutcome> TakeOutcome() ABSL_LOCKS_EXCLUDED(mu_);
  // Where the service parks the calls that wait on this hub (a stage, a place in a buffer, a
  // staging buffer): every change that may answer one wakes them.
  WaitList& waiters() { return notifier_.waiters(); }

  // Rejected client messages so far (all rounds), including those the transport turned away
  // itself (RecordRejection: e.g. a malformed masked-input stream).
  int64_t rejections() ABSL_LOCKS_EXCLUDED(mu_);
  void RecordRejection() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Status CheckClient(const std::string& experiment_id, int64_t round,
                           const std::string& client_id, int32_t* index) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts s against the sender when it failed; else index answered the open stage.
  absl::Status Count(absl::Status s, int32_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OpenLocked(std::vector<std::string> participants, SecAggConfig config,
                          double first_deadline_seconds, int64_t min_clients)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Finishes the open stage on the server and opens the next one with its messages (or ends
  // the round: done with its outcome, or aborted).
  void CloseStage() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ChangeNotifier notifier_;  // first: destroyed last, after whatever parks on it
  absl::Mutex mu_;
  SecAggHubOptions options_;
  Clock* clock_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  int64_t round_ ABSL_GUARDED_BY(mu_) = -1;
  SecAggQuantization quantization_ ABSL_GUARDED_BY(mu_);        // for the next Open
  SecAggQuantization round_quantization_ ABSL_GUARDED_BY(mu_);  // the open round's
  std::optional<SecAggServer> server_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> participants_ ABSL_GUARDED_BY(mu_);  // sorted: index -> client id
  std::vector<double> update_scales_ ABSL_GUARDED_BY(mu_);      // per participant (OpenBuffer)
  // Buffered rounds: the clients waiting for an instance, with when each last asked (hub clock).
  struct Waiting {
    SecAggJoiner joiner;
    absl::Time last_asked;
    int calls = 0;  // its Join calls waiting now
  };
  std::map<std::string, Waiting> joiners_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> join_holds_ ABSL_GUARDED_BY(mu_);       // HoldJoin, by client
  std::map<std::string, std::string> refused_ ABSL_GUARDED_BY(mu_);  // client -> reason, once
  SecAggStageTracker stages_ ABSL_GUARDED_BY(mu_);                   // the open round's stage
  absl::Status abort_reason_ ABSL_GUARDED_BY(mu_);
  absl::Time opened_at_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<double>> key_seconds_ ABSL_GUARDED_BY(mu_);  // per participant
  std::vector<std::optional<SecAggKeyDirectory>> directories_ ABSL_GUARDED_BY(mu_);
  // Per index, as SubmitKeys received them.
  std::vector<PeerAttestation> attestations_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<SecAggShareDelivery>> deliveries_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<SecAggUnmaskRequest>> unmask_requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::optional<SenderMetrics>> metrics_ ABSL_GUARDED_BY(mu_);
  // Per participant, from its masked input.
  std::vector<int64_t> counts_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> rejected_ ABSL_GUARDED_BY(mu_);
  std::optional<SecAggRoundOutcome> outcome_ ABSL_GUARDED_BY(mu_);
  int64_t rejections_ ABSL_GUARDED_BY(mu_) = 0;
  int staged_ ABSL_GUARDED_BY(mu_) = 0;                      // staging buffers handed out
  std::vector<StagingBuffer> staging_ ABSL_GUARDED_BY(mu_);  // free staging buffers
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_SECAGG_HUB_H_
