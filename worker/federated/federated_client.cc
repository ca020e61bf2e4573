#include "worker/federated/federated_client.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/secagg_participant.h"
#include "common/ids.h"
#include "common/mapped_floats.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "federation/dp_noise.h"
#include "worker/federated/command_trainer.h"

namespace sextant {
namespace {

// Buffered rounds: how many times its last training's duration, or the longest wait between
// two model versions it has seen, a client waits for a newer version before it trains on the
// same one again (RunFederatedClient); before it has seen two, kFirstVersionWait stands for
// the wait between versions.
constexpr int kNewerVersionWait = 3;
constexpr absl::Duration kFirstVersionWait = absl::Seconds(10);

bool Stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(); }

// The int8 rounding draws' seed: the client's round seed (from its aggregator) and its id, the
// same in every build.
uint64_t UpdateSeed(uint64_t round_seed, const std::string& id) { return round_seed ^ HashId(id); }

// A plaintext update as float32, or encoded as federation.update_compression says; the bytes it
// took on the wire, or why it was not sent (a value an encoding cannot hold is InvalidArgument).
absl::StatusOr<int64_t> Push(v1::FederationService::StubInterface* stub, const PushHeader& header,
                             absl::Span<const float> update, const std::vector<int64_t>& segments,
                             UpdateCompression mode, uint64_t seed, int64_t chunk_floats) {
  if (mode == UpdateCompression::kNone) return PushUpdate(stub, header, update, chunk_floats);
  SEXTANT_ASSIGN_OR_RETURN(EncodedUpdate encoded, EncodeUpdate(update, segments, mode, seed));
  return PushUpdate(stub, header, encoded, chunk_floats);
}

}  // namespace

absl::StatusOr<FederatedClientStats> RunFederatedClient(const FederatedClientOptions& o,
                                                        const train::FashionMnist& data,
                                                        Clock* clock,
                                                        const std::atomic<bool>* stop) {
  if (o.job.own_model && o.job.client_command.empty()) {
    return absl::InvalidArgumentError(
        "a model of your own (federation.model) needs federation.client_command");
  }
  // A model of the user's own may come without the Fashion-MNIST share: then none is written.
  const bool has_data = !(o.job.own_model && data.train.size() == 0);
  ClientData mine;
  if (has_data) {
    SEXTANT_ASSIGN_OR_RETURN(mine, PartitionForClient(data, o.job, o.global_index));
  }
  SEXTANT_ASSIGN_OR_RETURN(const int64_t model_size, LayoutElements(o.job.layout));
  // The built-in trainer holds the built-in model: it trains it, or evaluates it on the held-out
  // share before a command client trains. A model of the user's own only the command knows.
  std::unique_ptr<LocalTrainer> trainer;
  if (!o.job.own_model) {
    SEXTANT_ASSIGN_OR_RETURN(trainer, LocalTrainer::Create(o.job.model, o.job.seed, o.threads));
    if (trainer->size() != model_size) {
      return absl::InternalError(absl::StrCat("the built-in model has ", trainer->size(),
                                              " parameters, its layout ", model_size));
    }
  }
  const std::string id =
      o.name.empty() ? ClientId(o.region, o.index) : absl::StrCat(o.region, "/", o.name);
  auto channel = grpc::CreateChannel(
      o.target, o.credentials ? o.credentials : grpc::InsecureChannelCredentials());
  auto stub = v1::FederationService::NewStub(channel);
  FederatedClientStats stats;
  stats.model_floats = model_size;
  stats.examples = mine.train.size();
  std::vector<float> global(model_size), local(model_size);
  const std::vector<int64_t> segments = LayoutSegments(o.job.layout);
  std::optional<CommandTrainer> command;
  if (!o.job.client_command.empty()) {
    CommandTrainerOptions c;
    c.layout = o.job.layout;
    c.argv = o.job.client_command;
    c.work_dir = !o.work_dir.empty() ? o.work_dir
                                     : absl::StrCat("/tmp/sextant-client-", o.experiment_id, "-",
                                                    o.region, "-", o.index);
    c.working_dir = o.job.command_dir;
    c.env = {{"SEXTANT_CLIENT_ID", id},
             {"SEXTANT_LR", absl::StrCat(o.job.local.lr)},
             {"SEXTANT_EPOCHS", absl::StrCat(o.job.local.epochs)},
             {"SEXTANT_BATCH_SIZE", absl::StrCat(o.job.local.batch_size)},
             {"SEXTANT_MU", absl::StrCat(o.job.local.proximal_mu)}};
    if (!o.data_dir.empty()) c.env["SEXTANT_DATA_DIR"] = o.data_dir;
    // The aggregators refuse a weight above max_weight (examples_per_client): say so here, as
    // the command's failure. DP sends every update with weight 1, whatever the command reports.
    if (o.job.dp_clip_norm == 0) c.max_examples = o.job.max_weight;
    SEXTANT_ASSIGN_OR_RETURN(CommandTrainer ct, CommandTrainer::Create(c, clock));
    if (has_data) SEXTANT_RETURN_IF_ERROR(ct.WriteClientShare(mine.train));
    command.emplace(std::move(ct));
  }
  int64_t after = -1;
  // federation.stragglers: how much longer than its training this client takes. Stragglers are
  // named by place (REGION/INDEX), which a client started by hand holds under a name of its own.
  const std::string place = ClientId(o.region, o.index);
  const double slowdown = std::find(o.job.slow_clients.begin(), o.job.slow_clients.end(), place) !=
                                  o.job.slow_clients.end()
                              ? o.job.slowdown
                              : 1.0;
  // Buffered rounds: each training draws its own shuffling. After training on a version the
  // client waits for a newer one, up to kNewerVersionWait times as long as that training took,
  // before it trains on the same version again: with every client training, an update computed
  // again from the version just stepped away from would be stale by design; a buffer that
  // cannot fill without it (a client gone) still fills.
  uint64_t trainings = 0;
  int64_t trained_on = -1;
  absl::Time newer_until = absl::InfinitePast();
  // When this client first saw its newest version, and the longest wait between two versions
  // so far (before any: kFirstVersionWait, so that a slow first step does not set every client
  // one version behind for the whole run).
  int64_t seen = -1;
  absl::Time seen_at = clock->Now();
  std::optional<absl::Duration> version_gap;
  // Tells the aggregator that this client's round `round` failed (why), so that the round stops
  // waiting for it and the run's console says why. Synchronous rounds only: a buffered client
  // just trains again.
  auto report_failure = [&](int64_t round, const absl::Status& why) {
    if (o.job.buffered) return;
    absl::Status told =
        ReportFailure(stub.get(), o.experiment_id, round, id, id, std::string(why.message()));
    if (!told.ok() && o.log != nullptr) {
      *o.log << "round=" << round << " failure not reported: " << told << "\n";
    }
  };
  while (!Stopped(stop)) {
    auto sink = [&](int64_t offset, absl::Span<const float> v) -> absl::Status {
      if (offset + static_cast<int64_t>(v.size()) > static_cast<int64_t>(global.size())) {
        return absl::InvalidArgumentError("the global model is larger than this client's model");
      }
      std::copy(v.begin(), v.end(), global.begin() + offset);
      return absl::OkStatus();
    };
    double poll = o.poll_seconds;
    if (o.job.buffered) {
      const absl::Duration left = newer_until - clock->Now();
      after = left > absl::ZeroDuration() ? trained_on : -1;
      if (after >= 0) poll = std::clamp(absl::ToDoubleSeconds(left), 0.05, poll);
    }
    // The aggregator may be starting or restarting: asked again, within a bound.
    absl::StatusOr<RoundTask> task = RetryWhileUnreachable<RoundTask>(
        clock, RetryPolicy{absl::Seconds(o.connect_timeout_seconds), absl::Milliseconds(200)},
        [&] { return PullRound(stub.get(), o.experiment_id, id, after, poll, sink); });
    if (IsUnreachable(task.status())) {
      return absl::UnavailableError(
          absl::StrCat("aggregator ", o.target, " unreachable: ", task.status().message()));
    }
    if (!task.ok()) return task.status();
    if (task->kind == RoundTask::Kind::kDone) break;
    if (task->kind == RoundTask::Kind::kWait) continue;
    if (task->model_size != model_size) {
      return absl::InvalidArgumentError(absl::StrCat("global model has ", task->model_size,
                                                     " values, this client's ", model_size));
    }
    if (!o.job.buffered) after = task->round;
    if (o.job.buffered && task->round > seen) {
      if (seen >= 0) {
        version_gap = std::max(version_gap.value_or(absl::ZeroDuration()), clock->Now() - seen_at);
      }
      seen = task->round;
      seen_at = clock->Now();
    }
    const uint64_t seed =
        o.job.buffered ? task->seed ^ (++trainings * 0x9E3779B97F4A7C15ULL) : task->seed;
    const absl::Time training_start = clock->Now();
    EvalResult before;
    if (trainer) {
      SEXTANT_RETURN_IF_ERROR(trainer->SetWeights(global));
      SEXTANT_ASSIGN_OR_RETURN(before, trainer->Evaluate(mine.held_out));
    }
    LocalTrainingOptions local_opts = o.job.local;
    local_opts.seed = seed;
    double train_loss = 0;
    int64_t examples = mine.train.size();
    if (command) {
      absl::StatusOr<CommandRoundResult> r =
          command->RunRound(task->round, seed, global, absl::MakeSpan(local));
      if (!r.ok()) {
        if (o.log != nullptr)
          *o.log << "round=" << task->round << " skipped: " << r.status() << "\n" << std::flush;
        report_failure(task->round, r.status());
        // Buffered: the same version comes straight back; do not spin on a failing command.
        if (o.job.buffered) clock->SleepFor(absl::Seconds(1));
        continue;
      }
      train_loss = r->train_loss;
      examples = r->num_examples;
      if (!trainer && r->eval_examples > 0) {  // the command's own evaluation of the global model
        before = EvalResult{r->eval_loss, r->eval_accuracy, r->eval_examples};
      }
    } else {
      SEXTANT_ASSIGN_OR_RETURN(train_loss, trainer->Train(mine.train, local_opts, global));
      SEXTANT_RETURN_IF_ERROR(trainer->GetWeights(absl::MakeSpan(local)));
    }
    if (slowdown > 1) clock->SleepFor((clock->Now() - training_start) * (slowdown - 1));
    for (size_t i = 0; i < local.size(); ++i) local[i] -= global[i];  // the update is a delta
    // The global model is not read again before the next round's pull writes it whole: its
    // memory goes back while the update is encoded and sent.
    ReleasePages(global.data(), global.size() * sizeof(float));
    double weight = static_cast<double>(examples);
    if (o.job.dp_clip_norm > 0) {
      // Client-level DP: a bounded contribution (norm <= C, weight 1) per client.
      SEXTANT_RETURN_IF_ERROR(ClipToL2Norm(absl::MakeSpan(local), o.job.dp_clip_norm));
      weight = 1;
    }
    const SenderMetrics metrics{train_loss, before.loss, before.accuracy,
                                static_cast<double>(before.examples)};
    absl::StatusOr<int64_t> sent;
    if (o.job.secure_aggregation) {
      SecAggParticipantOptions so;
      so.experiment_id = o.experiment_id;
      so.client_id = id;
      so.round = task->round;
      // Buffered: the update goes into the next buffer's instance, damped by its staleness.
      if (o.job.buffered) so.join_version = task->round;
      so.poll_seconds = o.poll_seconds;
      so.chunk_elements = o.chunk_floats;
      so.noise_multiplier = o.job.dp_noise_multiplier;
      so.signer = o.signer.get();
      so.noise_sensitivity = o.job.dp_clip_norm;
      sent =
          RunSecAggParticipant(stub.get(), so, clock, local, static_cast<int64_t>(weight), metrics);
      // Refused (a neighbour's key that is not its owner's, a malformed stage): this client
      // goes no further in the round, and says so. Aborted is the round closing without it.
      if (!sent.ok() && !absl::IsAborted(sent.status()) && !absl::IsUnavailable(sent.status())) {
        report_failure(task->round, sent.status());
      }
    } else {
      PushHeader header{o.experiment_id, task->round, id, weight, 1, metrics};
      sent = Push(stub.get(), header, local, segments, o.job.update_compression,
                  UpdateSeed(seed, id), o.chunk_floats);
    }
    if (o.log != nullptr) {
      *o.log << "round=" << task->round << " train_loss=" << train_loss
             << " eval_accuracy=" << before.accuracy << " examples=" << examples
             << " bytes_sent=" << (sent.ok() ? *sent : 0)
             << (sent.ok() ? "" : absl::StrCat(" rejected=", sent.status().ToString())) << "\n"
             << std::flush;
    }
    if (o.job.buffered) {  // delivered or turned away, the next update wants a newer version
      trained_on = task->round;
      newer_until = clock->Now() + kNewerVersionWait * std::max(clock->Now() - training_start,
                                                                version_gap.value_or(kFirstVersionWait));
    }
    if (!sent.ok()) continue;  // e.g. Aborted: the round closed first; wait for the next one
    stats.bytes_sent += *sent;
    ++stats.rounds;
  }
  return stats;
}

}  // namespace sextant
