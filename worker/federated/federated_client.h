#ifndef SEXTANT_WORKER_FEDERATED_FEDERATED_CLIENT_H_
#define SEXTANT_WORKER_FEDERATED_FEDERATED_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "aggregator/federation_calls.h"
#include "common/clock.h"
#include "grpcpp/security/credentials.h"
#include "rpc/key_signer.h"
#include "sextant/v1/federation_service.grpc.pb.h"
#include "worker/federated/federated_job.h"

namespace sextant {

struct FederatedClientOptions {
  // FederationService of its region's aggregator: NewStub over a channel dialled with
  // LoadChannelCredentials, or a test's. Required.
  std::shared_ptr<v1::FederationService::StubInterface> stub;
  std::string target;  // the aggregator's HOST:PORT, for messages
  // When set, asked while the aggregator is unreachable: a stub for where it serves now (its
  // instance replaced on another host), or null while it has not moved. Default none.
  std::function<std::shared_ptr<v1::FederationService::StubInterface>()> redial;
  std::string experiment_id;  // Required.
  std::string region;         // Required.
  int index = 0;              // its place within the region
  // The NAME of its id REGION/NAME: a client started by hand speaks as its certificate's name.
  // Default empty: its index.
  std::string name;
  int global_index = 0;  // over all regions (GlobalClientIndex): which partition it holds
  FederatedJob job;
  int threads = 1;          // CPU backend threads. Default 1.
  double poll_seconds = 5;  // long-poll bound per GetRound. Default 5.
  double connect_timeout_seconds =
      60;  // give up when the aggregator stays unreachable. Default 60.
  int64_t chunk_floats = kDefaultChunkFloats;
  std::ostream* log = nullptr;  // one line per round; default none
  // The command client's exchange folder (job.client_command). Default: a folder under /tmp.
  std::string work_dir;
  // With job.own_data: the client's data folder, given to its command as SEXTANT_DATA_DIR.
  // Default empty: none (the command finds its data itself).
  std::string data_dir;
  // Under TLS with secure aggregation: signs its SecAgg keys and checks its neighbours'
  // (SecAggParticipantOptions::signer). Default null.
  std::shared_ptr<const KeySigner> signer;
};

// A FederatedClientOptions::redial for a client of a region whose aggregator writes where it
// serves to `address_file` (HOST:PORT; RegionalAggregatorOptions::address_file): null while the
// file is missing or names the address last dialled (first `dialled`), else a stub over a new
// channel to the address it names, with `credentials` (a non-loopback one only with `tls`,
// CheckDialAllowed), the move said on `log` (may be null).
std::function<std::shared_ptr<v1::FederationService::StubInterface>()> RedialFromAddressFile(
    std::string address_file, std::string dialled,
    std::shared_ptr<grpc::ChannelCredentials> credentials, bool tls, std::ostream* log);

struct FederatedClientStats {
  int rounds = 0;          // updates accepted
  int64_t bytes_sent = 0;  // PushUpdate payload bytes in all
  int64_t model_floats = 0;
  int64_t examples = 0;  // its training share
};

// A federated client: holds its partition of `data` (raw data never leaves this process), and
// for every round it is sampled for pulls the global model from its aggregator, trains locally
// from it (FedProx when mu > 0) and pushes its update (local minus global weights, weighted by
// its example count). With job.client_command the user's command trains instead
// (CommandTrainer: the model goes out as safetensors in job.layout, the trained model and
// num_examples= come back); a round whose command fails, or whose model is refused (another
// layout: the log names the tensor), is skipped (the round closes without it) and logged.
// With job.own_model (federation.model) there is no built-in trainer: the update's evaluation
// metrics are the command's eval_loss= and eval_accuracy=, and when `data` is empty no share is
// written (the command reads data of its own). Under secure aggregation a command's
// num_examples above SecAggMaxWeight (federation.examples_per_client) skips its round, saying so.
// Returns when the experiment ends or *stop reads true (a spot notice, a signal). A client
// stopped while sampled for a synchronous round leaves it at once, before its training or
// between its secure stages: it reports the round failed ("preempted: stopped ...") so that
// the round goes on without it instead of waiting out its deadline.
// Errors: a bad job or data; Unavailable when the aggregator cannot be reached for
// connect_timeout_seconds.
// clock (not owned) times the retries, the SecAgg stage waits and the command client; it must
// outlive the call.
absl::StatusOr<FederatedClientStats> RunFederatedClient(const FederatedClientOptions& options,
                                                        const train::FashionMnist& data,
                                                        Clock* clock,
                                                        const std::atomic<bool>* stop);

}  // namespace sextant

#endif  // SEXTANT_WORKER_FEDERATED_FEDERATED_CLIENT_H_
