// One tier of federated rounds, the same at both levels: the orchestrator runs the global tier
// (its senders are regions) and each `sextant-worker --role aggregator` a regional one (its
// senders are the region's clients). A tier owns the round hub, the SecAgg hub, the sender gate,
// FederationService and the gRPC server that serves them; the round, from publish through wait
// and close to the decoded mean (RunRound: plaintext, secure, or secure with the sum kept for
// the regions' round); and, at a regional tier, its side of the tier above: pulling each
// round's model from upstream and pushing the aggregate back. What a round's outcome becomes
// (stepping the server optimiser and checkpointing, or a region's push) is its owner's.
#ifndef SEXTANT_AGGREGATOR_TIER_H_
#define SEXTANT_AGGREGATOR_TIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "aggregator/federation_calls.h"
#include "aggregator/federation_hub.h"
#include "aggregator/federation_service.h"
#include "aggregator/secagg_hub.h"
#include "aggregator/sender_gate.h"
#include "common/clock.h"
#include "common/mapped_floats.h"
#include "grpcpp/grpcpp.h"

namespace sextant {

// The tier above a regional tier: how it is reached and what this tier is called there.
struct UpstreamOptions {
  // FederationService of the tier above (NewStub over its channel, or a test's). Required.
  std::shared_ptr<v1::FederationService::StubInterface> stub;
  std::string target;     // HOST:PORT, for messages
  std::string sender_id;  // this tier's id upstream: its region. Required.
  // How long upstream may stay unreachable before a pull gives up. Default 60 s.
  absl::Duration unreachable_timeout = absl::Seconds(60);
  // The id the tier above knows this tier's client `id` by: a client started by hand holds a
  // place (ClientRoster::PlaceOf). Default none: its own id.
  std::function<std::string(const std::string& id)> place_of;
};

struct TierOptions {
  std::string listen = "127.0.0.1:0";  // Default: loopback, any port.
  // TLS/mTLS with RoleAuthProcessor (MakeServerCredentials). Default null: plaintext.
  std::shared_ptr<grpc::ServerCredentials> credentials;
  RoundCoordinatorOptions coordinator;  // experiment_id and model_size required
  TierPolicy policy;                    // who may send as whom
  int64_t chunk_floats = kDefaultChunkFloats;
  // The SecAgg hub behind the SecAgg RPCs; default: none (they answer FAILED_PRECONDITION).
  bool secure = false;
  SecAggHubOptions secagg;  // with secure; experiment_id is taken from coordinator
  // An update being staged that sends nothing for this long loses its buffer to the next
  // sender (FederationHub). Default 5 s.
  absl::Duration stall_timeout = absl::Seconds(5);
  // Calls the server runs at once, in all and per certificate identity (CallQuota): one peer,
  // or a flood of them, cannot take what the others need. Waiting calls hold no thread.
  CallLimits calls;
  // Memory gRPC may take for the server's buffers (a grpc::ResourceQuota). Default 1 GiB.
  int64_t max_memory_bytes = int64_t{1} << 30;
  // Participants started by hand ask here what to run with (FederationService.Join). Default
  // none: the tier's owner starts them, and Join is FAILED_PRECONDITION.
  JoinHandler join;
  // The tier below reports its clients that joined by hand on a pool (ReportJoin). Default
  // none: FAILED_PRECONDITION.
  JoinReportHandler join_report;
  // A regional tier's tier above. Default none: the global tier.
  std::optional<UpstreamOptions> upstream;
  // Installed on the tier's server (StartFederationServer). Default none.
  ServerInterceptors interceptors;
};

// One synchronous round at a tier: what it publishes and how it closes.
struct RoundPlan {
  int64_t round = 0;
  std::string model_path;                  // the round's model, written by the tier's owner
  std::map<std::string, RoundTask> tasks;  // each participant's task; empty: none here
  double deadline_seconds = 0;             // the hub closes at it once min_updates are in
  int64_t min_updates = 1;
  // A secure round: opens the round's SecAgg instance (its quantisation, then SecAggHub::Open
  // or OpenWithConfig) before anything is published, so that no participant finds it closed.
  // Null: a plaintext round, closed by the hub.
  std::function<absl::Status(SecAggHub&)> open_secure;
  // How a secure round's sum is taken: kept encoded (ClosedRound::sum) for the regions' round
  // above, or decoded (DecodeSecureRound) for at most decode_max_clients inputs (0: as many as
  // the instance has clients).
  bool keep_sum = false;
  int64_t decode_max_clients = 0;
};

// A closed round, as its owner takes it.
struct ClosedRound {
  // The outcome. Its mean (none when the sum is kept encoded) stays valid until the tier's
  // next round closes or ReleaseOutcome. rejected: the updates turned away this round.
  RoundOutcome outcome;
  std::vector<SenderReport> senders;  // a plaintext round's senders
  // How long each participant took to deliver: a plaintext one that missed the close counts
  // the round's length, a lower bound (client_selection).
  std::vector<std::pair<std::string, double>> client_seconds;
  RingVector sum;  // a secure round's sum, when kept encoded
};

// Not thread-safe itself (its owner's loop calls it); the hubs it owns are, and serve the RPCs.
class Tier {
 public:
  // Starts serving; clock (not owned) times its rounds and waits and must outlive the tier.
  // InvalidArgument for bad coordinator options; Unavailable when it cannot listen.
  static absl::StatusOr<std::unique_ptr<Tier>> Start(TierOptions options, Clock* clock);
  ~Tier();  // Shutdown(absl::ZeroDuration()) unless already shut down

  int port() const { return port_; }
  FederationHub& hub() { return *hub_; }
  SecAggHub& secagg() { return *secagg_; }  // only with options.secure
  SenderGate& gate() { return gate_; }
  // The bytes this tier's server moved for each sender: at the global tier, each region's.
  const TransferMeter& transfer() const { return transfer_; }

  // How a round closes: its plaintext updates folded by the hub (kPlain), or its SecAgg round
  // run through its stages (kSecure).
  enum class Close { kPlain, kSecure };

  // Waits until the open round may close: the hub's close rule holds (kPlain), or the SecAgg
  // round has finished its stages (kSecure). Every 200 ms it asks interrupt(); a non-OK answer
  // ends the wait with that status. OK once the round may close.
  absl::Status AwaitClosable(Close how, const std::function<absl::Status()>& interrupt);

  // Opens plan's round: its SecAgg instance first when it is secure, then the round published
  // to its participants (none: only the SecAgg instance opens). Once it is published, the model
  // file of the round published before goes: the tier owns the files it publishes. The hubs'
  // errors.
  absl::Status OpenRound(RoundPlan plan);
  // Closes the open round once AwaitClosable said it may: the hub's weighted mean (plaintext),
  // or the SecAgg instance's sum, decoded or kept. The hub's error when no update made it
  // (every participant failed); the SecAgg round's when it aborted.
  absl::StatusOr<ClosedRound> TakeRound();
  // The whole round: OpenRound, AwaitClosable (relaying the participants' failures upstream as
  // they come, asking interrupt()), TakeRound. interrupt()'s status when it stops the wait.
  absl::StatusOr<ClosedRound> RunRound(RoundPlan plan,
                                       const std::function<absl::Status()>& interrupt);
  // Gives back the memory of the last round's mean (ClosedRound::outcome.mean).
  void ReleaseOutcome();
  // The updates turned away while the last round taken was open, whether it closed or failed.
  int64_t last_rejected() const { return last_rejected_; }

  // Waits (up to `wait` on the tier's clock, asking interrupt() every 200 ms) until every one of
  // ids has asked for a round. Returns those that have not (empty when all have), or
  // interrupt()'s status.
  absl::StatusOr<std::vector<std::string>> AwaitContact(
      const std::vector<std::string>& ids, absl::Duration wait,
      const std::function<absl::Status()>& interrupt);

  // Upstream (a regional tier only): the next round's task above after_round, its model
  // passed to sink chunk by chunk (PullRound, as this tier's sender id, long-polling up to
  // wait_seconds). While upstream is unreachable it retries every 200 ms (tier's clock), asking
  // interrupt() each time, until unreachable_timeout: then Unavailable naming upstream. Other
  // errors are upstream's status, or interrupt()'s.
  absl::StatusOr<RoundTask> PullRound(
      int64_t after_round, double wait_seconds,
      const std::function<absl::Status(int64_t, absl::Span<const float>)>& sink,
      const std::function<absl::Status()>& interrupt);
  // Pushes this tier's aggregate upstream (PushUpdate as this tier's sender id, in chunks of
  // chunk_floats). Returns the payload bytes sent, or upstream's status.
  absl::StatusOr<int64_t> PushAggregate(PushHeader header, absl::Span<const float> mean);
  // Upstream (a regional tier only): passes the failures its clients reported (hub's
  // TakeFailures) to the tier above, as this tier's sender id, so that the run's console
  // names each. Best effort: a report upstream refuses (the round moved on) is dropped.
  void RelayFailures();
  // Upstream: this tier's own round `round` produced nothing to push (why), so the tier above
  // stops waiting for it. Upstream's status.
  absl::Status ReportRoundFailed(int64_t round, const std::string& why);
  // Upstream's stub, for the regions' secure round; null at the global tier.
  v1::FederationService::StubInterface* upstream() {
    return options_.upstream ? options_.upstream->stub.get() : nullptr;
  }

  // Ends the experiment for every participant (kDone), waits up to `grace` until every one that
  // ever asked for a round has been told (FederationHub::WaitUntilAllHeardDone), then stops the
  // server.
  void Shutdown(absl::Duration grace);
  // Stops this tier while the experiment goes on (a spot notice, a signal): its participants
  // are answered Unavailable rather than kDone (FederationHub::SetStopping), so that they keep
  // asking and find its replacement; then the server stops.
  void Stop();

 private:
  Tier(TierOptions options, Clock* clock, std::unique_ptr<FederationHub> hub);
  void StopServer();  // within a second; waiting calls are cancelled

  TierOptions options_;
  Clock* clock_;
  std::unique_ptr<FederationHub> hub_;
  std::unique_ptr<SecAggHub> secagg_;
  SenderGate gate_;
  TransferMeter transfer_;  // before service_, which counts into it
  std::unique_ptr<FederationServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  // The open round's plan (its tasks moved to the hub), and its SecAgg rejections counted so
  // far.
  RoundPlan open_;
  int64_t secure_rejections_ = 0;
  int64_t last_rejected_ = 0;
  std::string published_model_;  // the model file of the round last published
  LazyFloats secure_mean_;  // a secure round's decoded mean
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_TIER_H_
