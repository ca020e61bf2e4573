#include "worker/federated/federated_job.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "aggregator/federation_plan.h"
#include "common/status_macros.h"
#include "federation/update_codec.h"

namespace sextant {

absl::StatusOr<FederatedJob> FederatedJobFromSpec(const v1::ExperimentSpec& spec) {
  if (!spec.has_federation()) return absl::InvalidArgumentError("the experiment has no federation");
  const v1::Federation& f = spec.federation();
  FederatedJob job;
  const v1::BuiltinTrainer& b = spec.trial().builtin();
  if (!b.model().empty()) job.model.kind = b.model();
  job.model.hidden = {128};
  if (auto it = b.args().find("hidden"); it != b.args().end()) {
    job.model.hidden.clear();
    for (absl::string_view part : absl::StrSplit(it->second, ',')) {
      int h = 0;
      if (!absl::SimpleAtoi(part, &h)) {
        return absl::InvalidArgumentError(absl::StrCat("hidden: '", it->second, "' is not a list"));
      }
      job.model.hidden.push_back(h);
    }
  }
  if (auto it = b.args().find("dropout"); it != b.args().end()) {
    if (!absl::SimpleAtof(it->second, &job.model.dropout)) {
      return absl::InvalidArgumentError(absl::StrCat("dropout: '", it->second, "'"));
    }
  }
  SEXTANT_RETURN_IF_ERROR(train::ValidateModelSpec(job.model));
  job.local.epochs = std::max(1, f.local_epochs());
  job.local.batch_size = std::max(1, f.local_batch_size());
  job.local.lr = static_cast<float>(f.local_lr() > 0 ? f.local_lr() : 0.01);
  job.local.proximal_mu = f.proximal_mu();
  job.seed = f.seed();
  job.partition = f.partition().empty() ? "iid" : f.partition();
  job.dirichlet_alpha = f.dirichlet_alpha() > 0 ? f.dirichlet_alpha() : 0.5;
  job.total_clients = static_cast<int>(TotalClients(f));
  job.examples_per_client = f.examples_per_client();
  if (f.validation_examples() > 0) job.validation_examples = f.validation_examples();
  job.client_command.assign(f.client_command().begin(), f.client_command().end());
  job.secure_aggregation = f.secure_aggregation();
  job.dp_clip_norm = DpClipNorm(f);
  job.dp_noise_multiplier = DistributedNoiseMultiplier(f);
  if (!f.update_compression().empty()) {
    std::optional<UpdateCompression> c = ParseUpdateCompression(f.update_compression());
    if (!c) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_compression: unknown '", f.update_compression(), "'"));
    }
    if (*c == UpdateCompression::kF16 && job.secure_aggregation) {
      return absl::InvalidArgumentError(
          "update_compression fp16 applies to plaintext updates, not with secure_aggregation");
    }
    job.update_compression = *c;
  }
  job.buffered = f.mode() == "buffered";
  job.reproducible = f.reproducible();
  job.slow_clients.assign(f.stragglers().clients().begin(), f.stragglers().clients().end());
  job.slowdown = std::max(1.0, f.stragglers().slowdown());
  if (!spec.source_path().empty()) {
    job.command_dir = std::filesystem::path(spec.source_path()).parent_path().string();
  }
  job.own_model = !f.model_file().empty();
  job.own_data = f.data() == "own";
  job.max_weight = SecAggMaxWeight(f);
  if (job.own_model) {
    SEXTANT_ASSIGN_OR_RETURN(job.layout, LayoutFromSpec(f));
  } else {
    job.layout = BuiltinModelLayout(job.model);
  }
  return job;
}

TensorFile BuiltinModelLayout(const train::ModelSpec& spec) {
  TensorFile layout;
  auto add = [&](const std::string& layer, int64_t in, int64_t out) {
    layout.tensors.push_back(Tensor{layer + ".weight", DType::kF32, {in, out}, {}});
    layout.tensors.push_back(Tensor{layer + ".bias", DType::kF32, {out}, {}});
  };
  int64_t width = spec.inputs();
  if (spec.kind == "cnn") {
    int64_t h = spec.height, w = spec.width, c = spec.channels;
    for (size_t i = 0; i < spec.conv_channels.size(); ++i) {
      add(absl::StrCat("conv", i + 1), int64_t{spec.kernel} * spec.kernel * c,
          spec.conv_channels[i]);
      h /= 2;
      w /= 2;
      c = spec.conv_channels[i];
    }
    width = h * w * c;
  }
  std::vector<int64_t> sizes(spec.hidden.begin(), spec.hidden.end());
  sizes.push_back(spec.classes);
  for (size_t i = 0; i < sizes.size(); ++i) {
    add(absl::StrCat("fc", i + 1), width, sizes[i]);
    width = sizes[i];
  }
  return layout;
}

absl::StatusOr<TensorFile> LayoutFromSpec(const v1::Federation& federation) {
  TensorFile layout;
  for (const v1::TensorLayout& l : federation.model_layout()) {
    const std::optional<DType> dtype = ParseDType(l.dtype());
    if (!dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", l.name(), "\": dtype \"", l.dtype(), "\" is not supported"));
    }
    Tensor t{l.name(), *dtype, {l.shape().begin(), l.shape().end()}, {}};
    if (!NumElements(t.shape)) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", l.name(), "\": invalid shape ", ShapeText(t.shape)));
    }
    layout.tensors.push_back(std::move(t));
  }
  return layout;
}

absl::StatusOr<int> GlobalClientIndex(const v1::Federation& federation, const std::string& region,
                                      int index) {
  int base = 0;
  for (const auto& r : federation.regions()) {
    if (r.name() == region) {
      if (index < 0 || index >= r.clients()) {
        return absl::OutOfRangeError(
            absl::StrCat("region ", region, " has ", r.clients(), " clients; no index ", index));
      }
      return base + index;
    }
    base += r.clients();
  }
  return absl::NotFoundError(absl::StrCat("no region '", region, "' in the federation"));
}

namespace {

// McMahan et al.: sort by label, cut into 2 * clients shards, deal two random shards to each.
std::vector<std::vector<int64_t>> PartitionShards(const std::vector<int32_t>& labels, int clients,
                                                  uint64_t seed) {
  std::vector<int64_t> order(labels.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return labels[a] < labels[b]; });
  const int shards = 2 * clients;
  std::vector<int> shard_ids(shards);
  std::iota(shard_ids.begin(), shard_ids.end(), 0);
  std::mt19937_64 rng(seed ^ 0x5368617264ULL);
  std::shuffle(shard_ids.begin(), shard_ids.end(), rng);
  const int64_t n = static_cast<int64_t>(order.size());
  std::vector<std::vector<int64_t>> parts(clients);
  for (int i = 0; i < shards; ++i) {
    const int s = shard_ids[i];
    const int64_t begin = n * s / shards, end = n * (s + 1) / shards;
    auto& p = parts[i / 2];
    p.insert(p.end(), order.begin() + begin, order.begin() + end);
  }
  return parts;
}

}  // namespace

absl::StatusOr<ClientData> PartitionForClient(const train::FashionMnist& data,
                                              const FederatedJob& job, int global_index) {
  if (global_index < 0 || global_index >= job.total_clients) {
    return absl::OutOfRangeError(
        absl::StrCat("client index ", global_index, " of ", job.total_clients));
  }
  std::vector<std::vector<int64_t>> parts;
  if (job.partition == "dirichlet") {
    SEXTANT_ASSIGN_OR_RETURN(
        parts, train::PartitionDirichlet(data.train.y, data.train.num_classes, job.total_clients,
                                         job.dirichlet_alpha, job.seed));
  } else if (job.partition == "shards") {
    if (data.train.size() < 2 * job.total_clients) {
      return absl::InvalidArgumentError("fewer training examples than shards");
    }
    parts = PartitionShards(data.train.y, job.total_clients, job.seed);
  } else {
    SEXTANT_ASSIGN_OR_RETURN(parts,
                             train::PartitionIid(data.train.size(), job.total_clients, job.seed));
  }
  std::vector<int64_t> mine = std::move(parts[global_index]);
  std::mt19937_64 rng(job.seed * 7919 + static_cast<uint64_t>(global_index));
  std::shuffle(mine.begin(), mine.end(), rng);
  const int64_t held = std::max<int64_t>(1, static_cast<int64_t>(mine.size()) / 10);
  std::vector<int64_t> held_idx(mine.begin(), mine.begin() + std::min<int64_t>(held, mine.size()));
  std::vector<int64_t> train_idx(mine.begin() + held_idx.size(), mine.end());
  if (job.examples_per_client > 0 &&
      static_cast<int64_t>(train_idx.size()) > job.examples_per_client) {
    train_idx.resize(job.examples_per_client);
    held_idx.resize(
        std::min<int64_t>(held_idx.size(), std::max<int64_t>(1, job.examples_per_client / 10)));
  }
  if (train_idx.empty())
    return absl::FailedPreconditionError("the client's share is too small to train on");
  ClientData out;
  out.train = data.train.Subset(train_idx);
  out.held_out = data.train.Subset(held_idx);
  return out;
}

}  // namespace sextant
