// One tier of federated rounds, the same at both levels: the orchestrator runs the global tier
// (its senders are regions) and each `sextant-worker --role aggregator` a regional one (its
// senders are the region's clients). A tier owns the round hub, the SecAgg hub, the sender gate,
// FederationService and the gRPC server that serves them, and the publish / wait / close cycle
// of a round. What happens around a round (pulling the model from upstream and pushing the
// aggregate back, or stepping the server optimiser and checkpointing) is its owner's.
#ifndef SEXTANT_AGGREGATOR_TIER_H_
#define SEXTANT_AGGREGATOR_TIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "aggregator/federation_hub.h"
#include "aggregator/federation_service.h"
#include "aggregator/secagg_hub.h"
#include "aggregator/sender_gate.h"
#include "common/clock.h"
#include "grpcpp/grpcpp.h"

namespace sextant {

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
  // Most concurrent RPC threads the server runs (a grpc::ResourceQuota): a flood of callers
  // queues instead of exhausting the process. Default 256.
  int max_threads = 256;
  // Participants started by hand ask here what to run with (FederationService.Join). Default
  // none: the tier's owner starts them, and Join is FAILED_PRECONDITION.
  JoinHandler join;
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

  // How a round closes: its plaintext updates folded by the hub (kPlain), or its SecAgg round
  // run through its stages (kSecure).
  enum class Close { kPlain, kSecure };

  // Waits until the open round may close: the hub's close rule holds (kPlain), or the SecAgg
  // round has finished its stages (kSecure). Every 200 ms it asks interrupt(); a non-OK answer
  // ends the wait with that status. OK once the round may close.
  absl::Status AwaitClosable(Close how, const std::function<absl::Status()>& interrupt);

  // Waits (up to `wait` on the tier's clock, asking interrupt() every 200 ms) until every one of
  // ids has asked for a round. Returns those that have not (empty when all have), or
  // interrupt()'s status.
  absl::StatusOr<std::vector<std::string>> AwaitContact(
      const std::vector<std::string>& ids, absl::Duration wait,
      const std::function<absl::Status()>& interrupt);

  // Ends the experiment for every participant (kDone), waits up to `grace` until every one that
  // ever asked for a round has been told (FederationHub::WaitUntilAllHeardDone), then stops the
  // server.
  void Shutdown(absl::Duration grace);

 private:
  Tier(TierOptions options, Clock* clock, std::unique_ptr<FederationHub> hub);

  TierOptions options_;
  Clock* clock_;
  std::unique_ptr<FederationHub> hub_;
  std::unique_ptr<SecAggHub> secagg_;
  SenderGate gate_;
  std::unique_ptr<FederationServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_TIER_H_
