#ifndef SEXTANT_AGGREGATOR_REGIONAL_AGGREGATOR_H_
#define SEXTANT_AGGREGATOR_REGIONAL_AGGREGATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "aggregator/federation_service.h"
#include "common/clock.h"
#include "rpc/key_signer.h"

namespace sextant {

struct RegionalAggregatorOptions {
  std::string upstream;                // the orchestrator's FederationService, HOST:PORT. Required.
  std::string listen = "127.0.0.1:0";  // where its clients connect. Default: loopback, any port.
  std::string port_file;               // receives the bound port once serving. Default none.
  // Receives HOST:PORT, where its clients dial it (DialTarget of listen), once serving: a
  // replacement instance, on whatever host, rewrites it for clients that read it again.
  // Default none.
  std::string address_file;
  std::string experiment_id;            // Required.
  std::string region;                   // its id upstream. Required.
  int64_t model_size = 0;               // floats. Required.
  std::string work_dir;                 // holds the round's global model file. Required.
  double poll_seconds = 5;              // Default 5.
  double connect_timeout_seconds = 60;  // Default 60.
  int64_t chunk_floats = kDefaultChunkFloats;
  // How client updates combine. Default: streaming FedAvg (memory 2 x model size); a robust rule
  // keeps every update of the round (O(clients x model size), see RoundCoordinatorOptions).
  AggregationRule rule;
  // Buffered asynchronous rounds (federation.mode: buffered; see BufferPolicy): clients train
  // continuously on the newest version, and the aggregator pushes each full buffer of their
  // updates. Plaintext only. Default off: synchronous rounds.
  BufferPolicy buffer;
  // Central differential privacy over plaintext updates: each client update is clipped here to
  // this L2 norm and counts with weight 1 (RoundCoordinatorOptions::clip_norm), whatever the
  // client did. Default 0: off.
  double dp_clip_norm = 0;
  // Reproducible rounds (federation.reproducible): a round's client updates fold at its close,
  // in the order of the clients' ids, not as they arrive (RoundCoordinatorOptions::ordered;
  // memory O(clients x model size)). Default off.
  bool ordered = false;
  // Secure aggregation (SecAgg+) with the region's clients instead of plaintext updates; the
  // quantisation every client uses and the deadline of each stage after the first (the first
  // closes like a plaintext round: all clients in, or the round deadline with min_updates).
  // Default off.
  bool secure_aggregation = false;
  SecAggQuantization quantization;
  double stage_timeout_seconds = 30;  // Default 30.
  // With secure_aggregation: the region's sum is not decoded here but sent, masked, in one more
  // SecAgg round among the regions run by the orchestrator (federation.hide_region_sums); the
  // ring is then sized for ring_clients, every client of the run. Default off.
  bool hide_region_sum = false;
  int64_t ring_clients = 0;
  // The region's clients (ids as ClientId). Before it first asks upstream for a round, the
  // aggregator waits until each has connected once, or startup_wait_seconds passed: a round's
  // deadline then runs against clients that are up, not ones still starting. Default none: no
  // wait.
  std::vector<std::string> clients;
  double startup_wait_seconds = 120;  // Default 120.
  // Clients started by hand (`sextant-worker --role client --join`): each asks here what to run
  // with (FederationService.Join, by its client certificate of this region) and is given its
  // place among `clients` (ClientRoster, kept in work_dir/clients.txt), which it then speaks as
  // REGION/NAME of its certificate, and client_spec (a serialized ExperimentSpec). Rounds
  // sample places; the aggregator gives each to its holder. Default off: the run starts them.
  bool join_clients = false;
  // The experiment as the orchestrator signed it (JoinPlan.spec, spec_signature and
  // spec_certificate), relayed to the clients unchanged.
  std::string client_spec;
  std::string client_spec_signature;
  std::string client_spec_certificate;
  int64_t client_spec_expires_at = 0;
  // The largest weight (example count) one client may declare (SenderGate). Default 0:
  // unbounded.
  double max_client_weight = 0;
  std::ostream* log = nullptr;
  // How it dials upstream and serves its clients (LoadChannelCredentials, MakeServerCredentials
  // over LoadServerSecurity(dir, "aggregator")). Default null: plaintext.
  std::shared_ptr<grpc::ChannelCredentials> upstream_credentials;
  std::shared_ptr<grpc::ServerCredentials> server_credentials;
  // Under TLS: signs this region's keys in the regions' round and checks the other regions'
  // (SecAggParticipantOptions::signer). Default null.
  std::shared_ptr<const KeySigner> signer;
  // Installed on the server its clients reach (TierOptions::interceptors). Default none.
  ServerInterceptors interceptors;
};

// `sextant-worker --role aggregator`: serves FederationService to its region's clients. Each
// round it pulls the global model once from upstream (written to a file in work_dir and streamed
// to each sampled client from there), folds the clients' updates as they arrive into one
// streaming weighted mean (RoundCoordinator: memory is the mean plus one staging buffer; or keeps
// them for a robust rule), closes when every sampled client reported or the deadline passed with
// the round's min_updates for this region (from upstream), and pushes the regional mean with
// its total weight, client count and rejections upstream. Returns OK when the experiment
// ends or *stop reads true; Unavailable when upstream stays unreachable.
// With secure_aggregation the clients' updates arrive through SecAggHub instead: the aggregator
// holds only masked vectors and, once the round's four stages are through, the unmasked sum of
// the survivors' encodings, which it decodes (SecureQuantizer) into their weighted mean and
// pushes upstream as above. A round that aborts (fewer than t survivors) or that has fewer than
// two sampled clients in the region (one client's "sum" would be its update) pushes nothing:
// the global round closes at its deadline without this region.
// clock (not owned) times the startup wait, the rounds, the retries and every wait; it must
// outlive the call.
absl::Status RunRegionalAggregator(const RegionalAggregatorOptions& options, Clock* clock,
                                   const std::atomic<bool>* stop);

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_REGIONAL_AGGREGATOR_H_
