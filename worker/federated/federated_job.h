#ifndef SEXTANT_WORKER_FEDERATED_FEDERATED_JOB_H_
#define SEXTANT_WORKER_FEDERATED_FEDERATED_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ids.h"
#include "federation/update_codec.h"
#include "sextant/v1/experiment.pb.h"
#include "tensors/tensor_file.h"
#include "worker/federated/local_trainer.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"

namespace sextant {

// Everything a participant derives from the experiment: the model, the local training options
// and where its data partition comes from. Deterministic from the spec.
struct FederatedJob {
  train::ModelSpec model;
  // The global model's named tensors (data empty): federation.model_layout for a model of the
  // user's own (own_model), else BuiltinModelLayout(model). The model travels flat in this order.
  TensorFile layout;
  bool own_model = false;  // federation.model.file: only a command client can train it
  // federation.data: own: Sextant partitions nothing (no Fashion-MNIST is read); each client's
  // command reads its own data.
  bool own_data = false;
  // The most one update may weigh under secure aggregation (SecAggMaxWeight).
  int64_t max_weight = 0;
  LocalTrainingOptions local;
  uint64_t seed = 0;
  std::string partition = "iid";  // iid | dirichlet | shards
  double dirichlet_alpha = 0.5;
  int total_clients = 0;
  int64_t examples_per_client = 0;  // 0: the whole share
  int64_t validation_examples = 10000;
  std::string dataset_dir = train::kFashionMnistDir;
  // The command client (federation.client_command): argv, run from command_dir (the experiment
  // file's folder). Empty: the built-in trainer trains.
  std::vector<std::string> client_command;
  std::string command_dir;
  // federation.secure_aggregation: updates go to the aggregator through SecAgg+ (masked).
  bool secure_aggregation = false;
  // federation.dp: each update is clipped to this L2 norm and sent with weight 1; 0: no DP.
  double dp_clip_norm = 0;
  // Distributed DP noise: the noise multiplier sigma; each client adds sigma * C / sqrt(t) to
  // its clipped update, t its round's SecAgg threshold (SecAggParticipantOptions). 0 with
  // central noise or without DP.
  double dp_noise_multiplier = 0;
  // federation.update_compression: how a plaintext update travels to the aggregator (under
  // secure aggregation the round's config sets the quantisation instead). Default kNone
  // (float32).
  UpdateCompression update_compression = UpdateCompression::kNone;
  // federation.mode: buffered: the client trains continuously on the newest model version its
  // aggregator has, instead of once per round it is sampled for.
  bool buffered = false;
  // federation.reproducible: buffered, a client trains once on each model version and never
  // again on one it has trained on (its update would land in another buffer than it would
  // without the wait, by timing).
  bool reproducible = false;
  // federation.stragglers: these clients ("<region>/<index>") sleep after each local training
  // for (slowdown - 1) times its duration.
  std::vector<std::string> slow_clients;
  double slowdown = 1;
};

// The job of `spec` (trial.builtin gives the model: model, args.hidden, args.dropout).
// InvalidArgument for a spec without a federation block or with an unusable model.
absl::StatusOr<FederatedJob> FederatedJobFromSpec(const v1::ExperimentSpec& spec);

// The built-in model's parameters as named F32 tensors, in Model::parameters() order: for a
// "cnn" conv1.weight [k*k*in_channels, out_channels], conv1.bias [out_channels], conv2...,
// then for every model fc1.weight [in, out], fc1.bias [out], fc2... up to the output layer.
// Weights are stored [in, out] row-major, the transpose of torch.nn.Linear's [out, in].
TensorFile BuiltinModelLayout(const train::ModelSpec& spec);


// The layout of federation.model_layout. InvalidArgument naming the tensor with an unknown dtype
// or a negative dim.
absl::StatusOr<TensorFile> LayoutFromSpec(const v1::Federation& federation);

// The client's index over all regions, in the order of spec.federation.regions. NotFound for an
// unknown region, OutOfRange for an index past the region's clients.
absl::StatusOr<int> GlobalClientIndex(const v1::Federation& federation, const std::string& region,
                                      int index);

// A client's local data: its training share and a held-out tenth of it for evaluating the
// global model it receives.
struct ClientData {
  train::Dataset train;
  train::Dataset held_out;
};

// Partitions the training split of `data` among job.total_clients (IID, Dirichlet(alpha), or
// McMahan's shards: sorted by label, two shards per client), seeded by job.seed, and returns
// client `global_index`'s share. The same job always gives the same share.
absl::StatusOr<ClientData> PartitionForClient(const train::FashionMnist& data,
                                              const FederatedJob& job, int global_index);

}  // namespace sextant

#endif  // SEXTANT_WORKER_FEDERATED_FEDERATED_JOB_H_
