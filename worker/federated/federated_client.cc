#include "worker/federated/federated_client.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "aggregator/federation_calls.h"
#include "aggregator/secagg_participant.h"
#include "common/ids.h"
#include "common/mapped_floats.h"
#include "common/read_file.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "federation/dp_noise.h"
#include "grpcpp/grpcpp.h"
#include "rpc/peer_channel.h"
#include "rpc/server_security.h"
#include "worker/federated/command_trainer.h"

namespace sextant {
namespace {

bool Stopped(const std::atomic<bool>* stop) { return stop != nullptr && stop->load(); }

// Sleeps `d` on clock, or until `stop` is set (looked at every 50 ms).
void SleepUnlessStopped(Clock* clock, absl::Duration d, const std::atomic<bool>* stop) {
  const absl::Time until = clock->Now() + d;
  for (absl::Time now = clock->Now(); now < until && !Stopped(stop); now = clock->Now()) {
    clock->SleepFor(std::min(until - now, absl::Milliseconds(50)));
  }
}

// The seed of an update's stochastic rounding (int8 compression, secure quantisation): the
// client's round seed (from its aggregator) and its id, the same in every build.
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

// Buffered rounds: which model version a client asks for next, and each training's seed. Each
// training draws its own shuffling, from the version's seed and how many times the client has
// trained on that version: a client restarted with the run (a resume) draws what it would have
// drawn, so that a reproducible run resumes bit for bit. After training on a version the client
// waits for a newer one, up to kNewerVersionWait times as long as that training took or as the
// longest wait between two versions it has seen (kFirstVersionWait before it has seen two, so that
// a slow first step does not set every client one version behind for the whole run), before it
// trains on the same version again: with every client training, an update computed again from the
// version just stepped away from would be stale by design; a buffer that cannot fill without it
// (a client gone) still fills. In lockstep (federation.reproducible) it waits for a newer version
// however long that takes, so that every buffer holds what it would hold without the waits.
class BufferedPacing {
 public:
  explicit BufferedPacing(bool lockstep) : lockstep_(lockstep) {}

  static constexpr int kNewerVersionWait = 3;
  static constexpr absl::Duration kFirstVersionWait = absl::Seconds(10);

  // The round to ask for versions after (-1: any), and *poll cut to the wait left.
  int64_t After(absl::Time now, double* poll) const {
    if (lockstep_) return trained_on_;
    const absl::Duration left = newer_until_ - now;
    if (left <= absl::ZeroDuration()) return -1;
    *poll = std::clamp(absl::ToDoubleSeconds(left), 0.05, *poll);
    return trained_on_;
  }
  // A task of version `round` arrived at `now`; returns its training's seed.
  uint64_t Received(int64_t round, uint64_t task_seed, absl::Time now) {
    if (round > seen_) {
      if (seen_ >= 0) {
        version_gap_ = std::max(version_gap_.value_or(absl::ZeroDuration()), now - seen_at_);
      }
      seen_ = round;
      seen_at_ = now;
    }
    // Versions this far behind the newest will not be trained on again (max_staleness).
    while (!trainings_.empty() && trainings_.begin()->first < seen_ - 64) {
      trainings_.erase(trainings_.begin());
    }
    return task_seed ^ (++trainings_[round] * 0x9E3779B97F4A7C15ULL);
  }
  // Its update of version `round` was delivered or turned away at `now`, `took` after its
  // training began: the next one wants a newer version.
  void Trained(int64_t round, absl::Time now, absl::Duration took) {
    trained_on_ = round;
    newer_until_ =
        now + kNewerVersionWait * std::max(took, version_gap_.value_or(kFirstVersionWait));
  }

 private:
  bool lockstep_;
  std::map<int64_t, uint64_t> trainings_;  // version -> trainings on it
  int64_t trained_on_ = -1;
  absl::Time newer_until_ = absl::InfinitePast();
  int64_t seen_ = -1;  // the newest version seen, and when
  absl::Time seen_at_;
  std::optional<absl::Duration> version_gap_;  // the longest between two versions seen
};

// The client command (federation.client_command) client `id` runs each round, or none.
absl::StatusOr<std::optional<CommandTrainer>> MakeCommand(const FederatedClientOptions& o,
                                                          const std::string& id,
                                                          const ClientData& mine, bool has_data,
                                                          Clock* clock) {
  if (o.job.client_command.empty()) return std::optional<CommandTrainer>();
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
  return std::optional<CommandTrainer>(std::move(ct));
}

// The built-in trainer holds the built-in model: it trains it, or evaluates it on the held-out
// share before a command client trains. Null for a model of the user's own, which only the
// command knows. Internal when the built-in model is not the job's layout of `model_size`.
absl::StatusOr<std::unique_ptr<LocalTrainer>> MakeTrainer(const FederatedClientOptions& o,
                                                          int64_t model_size) {
  if (o.job.own_model) return std::unique_ptr<LocalTrainer>();
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<LocalTrainer> trainer,
                           LocalTrainer::Create(o.job.model, o.job.seed, o.threads));
  if (trainer->size() != model_size) {
    return absl::InternalError(absl::StrCat("the built-in model has ", trainer->size(),
                                            " parameters, its layout ", model_size));
  }
  return trainer;
}

// The next task for client `id` of a version above `after` (-1: any), waiting up to `poll`,
// its model written into `global`. The aggregator may be starting or restarting: asked again,
// within the client's connect timeout (or until `stop` is set: Cancelled), then Unavailable
// naming it; InvalidArgument for a model of another size than `global`.
absl::StatusOr<RoundTask> NextTask(const FederatedClientOptions& o,
                                   std::shared_ptr<v1::FederationService::StubInterface>& stub,
                                   const std::string& id, int64_t after, double poll,
                                   std::vector<float>& global, Clock* clock,
                                   const std::atomic<bool>* stop) {
  auto sink = [&](int64_t offset, absl::Span<const float> v) -> absl::Status {
    if (offset + static_cast<int64_t>(v.size()) > static_cast<int64_t>(global.size())) {
      return absl::InvalidArgumentError("the global model is larger than this client's model");
    }
    std::copy(v.begin(), v.end(), global.begin() + offset);
    return absl::OkStatus();
  };
  absl::StatusOr<RoundTask> task = RetryWhileUnreachable<RoundTask>(
      clock, RetryPolicy{absl::Seconds(o.connect_timeout_seconds), absl::Milliseconds(200)},
      [&]() -> absl::StatusOr<RoundTask> {
        // This client never cancels its own calls: a cancelled one is an aggregator that
        // stopped under it (its instance taken back), and its replacement answers the next.
        absl::StatusOr<RoundTask> t = PullRound(stub.get(), o.experiment_id, id, after, poll, sink);
        if (absl::IsCancelled(t.status())) {
          return absl::UnavailableError(
              absl::StrCat("the call was cancelled (", t.status().message(), ")"));
        }
        return t;
      },
      [&](const absl::Status&) {
        if (Stopped(stop)) return absl::CancelledError("stopped while its aggregator was away");
        // The replacement of an aggregator taken back may serve on another host.
        if (o.redial) {
          if (auto moved = o.redial()) stub = std::move(moved);
        }
        return absl::OkStatus();
      });
  if (IsUnreachable(task.status())) {
    return absl::UnavailableError(
        absl::StrCat("aggregator ", o.target, " unreachable: ", task.status().message()));
  }
  if (task.ok() && task->kind != RoundTask::Kind::kWait && task->kind != RoundTask::Kind::kDone &&
      task->model_size != static_cast<int64_t>(global.size())) {
    return absl::InvalidArgumentError(absl::StrCat("global model has ", task->model_size,
                                                   " values, this client's ", global.size()));
  }
  return task;
}

// One local training: what it reports, with the global model's evaluation before it.
struct LocalRound {
  double train_loss = 0;
  int64_t examples = 0;
  EvalResult before;  // the built-in trainer's on the held-out share, else the command's own
  absl::Status command_failed;  // the client command failed this round: nothing to send
};

// Trains the round's model `global` into `local` (the trained weights): with the client
// command when there is one, else the built-in trainer (which `stop` ends between steps). The
// trainer's own errors are returned; a command's failure is LocalRound::command_failed.
absl::StatusOr<LocalRound> TrainLocally(const FederatedClientOptions& o, LocalTrainer* trainer,
                                        CommandTrainer* command, const ClientData& mine,
                                        int64_t round, uint64_t seed,
                                        const std::vector<float>& global, absl::Span<float> local,
                                        const std::atomic<bool>* stop) {
  LocalRound out;
  out.examples = static_cast<int64_t>(mine.train.size());
  if (trainer) {
    SEXTANT_RETURN_IF_ERROR(trainer->SetWeights(global));
    SEXTANT_ASSIGN_OR_RETURN(out.before, trainer->Evaluate(mine.held_out));
  }
  if (command == nullptr) {
    LocalTrainingOptions local_opts = o.job.local;
    local_opts.seed = seed;
    local_opts.stop = stop;
    SEXTANT_ASSIGN_OR_RETURN(out.train_loss, trainer->Train(mine.train, local_opts, global));
    SEXTANT_RETURN_IF_ERROR(trainer->GetWeights(local));
    return out;
  }
  absl::StatusOr<CommandRoundResult> r = command->RunRound(round, seed, global, local);
  if (!r.ok()) {
    out.command_failed = r.status();
    return out;
  }
  out.train_loss = r->train_loss;
  out.examples = r->num_examples;
  if (!trainer && r->eval_examples > 0) {  // the command's own evaluation of the global model
    out.before = EvalResult{r->eval_loss, r->eval_accuracy, r->eval_examples};
  }
  return out;
}

// Turns the trained weights in `local` into the update to send, a delta from `global`, and
// returns its weight: its examples, or under client-level DP 1 with the delta clipped to the
// job's norm. The global model's pages go back (the next round's pull writes it whole).
absl::StatusOr<double> ToUpdate(const FederatedJob& job, std::vector<float>& global,
                                absl::Span<float> local, int64_t examples) {
  for (size_t i = 0; i < local.size(); ++i) local[i] -= global[i];
  ReleasePages(global.data(), global.size() * sizeof(float));
  if (job.dp_clip_norm <= 0) return static_cast<double>(examples);
  SEXTANT_RETURN_IF_ERROR(ClipToL2Norm(local, job.dp_clip_norm));
  return 1.0;
}

// Sends client `id`'s update of `round` (a delta, of `weight`): through a SecAgg+ instance
// under secure aggregation, else pushed plainly (compressed as the job says). The bytes sent,
// or why not; `report` is told of a refusal that is this client's own failure, and of a stop
// (`stop` set) that ends its secure round before the last stage.
absl::StatusOr<int64_t> SendUpdate(
    const FederatedClientOptions& o, v1::FederationService::StubInterface* stub,
    const std::string& id, int64_t round, uint64_t seed, absl::Span<const float> update,
    double weight, const SenderMetrics& metrics, const std::vector<int64_t>& segments, Clock* clock,
    const std::atomic<bool>* stop, const std::function<void(const absl::Status&)>& report) {
  if (!o.job.secure_aggregation) {
    PushHeader header{o.experiment_id, round, id, weight, 1, metrics};
    return Push(stub, header, update, segments, o.job.update_compression, UpdateSeed(seed, id),
                o.chunk_floats);
  }
  SecAggParticipantOptions so;
  so.experiment_id = o.experiment_id;
  so.client_id = id;
  so.round = round;
  // Buffered: the update goes into the next buffer's instance, damped by its staleness.
  if (o.job.buffered) so.join_version = round;
  so.poll_seconds = o.poll_seconds;
  so.chunk_elements = o.chunk_floats;
  so.noise_multiplier = o.job.dp_noise_multiplier;
  so.signer = o.signer.get();
  so.noise_sensitivity = o.job.dp_clip_norm;
  so.rounding_seed = UpdateSeed(seed, id);
  so.stop = stop;
  absl::StatusOr<int64_t> sent =
      RunSecAggParticipant(stub, so, clock, update, static_cast<int64_t>(weight), metrics);
  // Refused (a neighbour's key that is not its owner's, a malformed stage): this client goes
  // no further in the round, and says so. Aborted is the round closing without it.
  if (!sent.ok() && !absl::IsAborted(sent.status()) && !absl::IsUnavailable(sent.status())) {
    report(sent.status());
  }
  return sent;
}

// This client's share of the data (empty without has_data). InvalidArgument for a model of the
// user's own without a client command to train it.
absl::StatusOr<ClientData> ClientShare(const FederatedClientOptions& o,
                                       const train::FashionMnist& data, bool has_data) {
  if (o.job.own_model && o.job.client_command.empty()) {
    return absl::InvalidArgumentError(
        "a model of your own (federation.model) needs federation.client_command");
  }
  if (!has_data) return ClientData{};
  return PartitionForClient(data, o.job, o.global_index);
}

// federation.stragglers: how much longer than its training this client takes. Stragglers are
// named by place (REGION/INDEX), which a client started by hand holds under a name of its own.
double StragglerSlowdown(const FederatedClientOptions& o) {
  const std::string place = ClientId(o.region, o.index);
  const std::vector<std::string>& slow = o.job.slow_clients;
  return std::find(slow.begin(), slow.end(), place) != slow.end() ? o.job.slowdown : 1.0;
}

// The client's log line for a round it trained: its metrics, and what became of its update.
void LogTrainedRound(std::ostream* log, int64_t round, const LocalRound& trained,
                     const absl::StatusOr<int64_t>& sent) {
  if (log == nullptr) return;
  *log << "round=" << round << " train_loss=" << trained.train_loss
       << " eval_accuracy=" << trained.before.accuracy << " examples=" << trained.examples
       << " bytes_sent=" << (sent.ok() ? *sent : 0)
       << (sent.ok() ? "" : absl::StrCat(" rejected=", sent.status().ToString())) << "\n"
       << std::flush;
}

}  // namespace

absl::StatusOr<FederatedClientStats> RunFederatedClient(const FederatedClientOptions& o,
                                                        const train::FashionMnist& data,
                                                        Clock* clock,
                                                        const std::atomic<bool>* stop) {
  // A model of the user's own may come without the Fashion-MNIST share: then none is written.
  const bool has_data = !(o.job.own_model && data.train.size() == 0);
  SEXTANT_ASSIGN_OR_RETURN(const ClientData mine, ClientShare(o, data, has_data));
  SEXTANT_ASSIGN_OR_RETURN(const int64_t model_size, LayoutElements(o.job.layout));
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<LocalTrainer> trainer, MakeTrainer(o, model_size));
  const std::string id =
      o.name.empty() ? ClientId(o.region, o.index) : absl::StrCat(o.region, "/", o.name);
  if (o.stub == nullptr) return absl::InvalidArgumentError("no aggregator to dial");
  std::shared_ptr<v1::FederationService::StubInterface> stub = o.stub;
  FederatedClientStats stats;
  stats.model_floats = model_size;
  stats.examples = mine.train.size();
  std::vector<float> global(model_size), local(model_size);
  const std::vector<int64_t> segments = LayoutSegments(o.job.layout);
  SEXTANT_ASSIGN_OR_RETURN(std::optional<CommandTrainer> command,
                           MakeCommand(o, id, mine, has_data, clock));
  int64_t after = -1;
  const double slowdown = StragglerSlowdown(o);
  BufferedPacing pacing(o.job.reproducible);
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
  // A stopped client (a spot notice, a signal) leaves its round at once rather than let the
  // round wait out its deadline for an update that will not come: its replacement takes its
  // place at the next round.
  auto leave = [&](int64_t round) {
    if (o.log != nullptr) *o.log << "round=" << round << " left: stopped\n" << std::flush;
    report_failure(round, absl::CancelledError("preempted: stopped (a spot notice or a signal) "
                                               "before its update went out"));
  };
  while (!Stopped(stop)) {
    double poll = o.poll_seconds;
    if (o.job.buffered) after = pacing.After(clock->Now(), &poll);
    absl::StatusOr<RoundTask> next = NextTask(o, stub, id, after, poll, global, clock, stop);
    if (!next.ok() && Stopped(stop)) break;
    SEXTANT_RETURN_IF_ERROR(next.status());
    const RoundTask& task = *next;
    if (task.kind == RoundTask::Kind::kDone) break;
    if (task.kind == RoundTask::Kind::kWait) continue;
    if (!o.job.buffered) after = task.round;
    if (Stopped(stop)) {
      leave(task.round);
      break;
    }
    const uint64_t seed =
        o.job.buffered ? pacing.Received(task.round, task.seed, clock->Now()) : task.seed;
    const absl::Time training_start = clock->Now();
    absl::StatusOr<LocalRound> training =
        TrainLocally(o, trainer.get(), command ? &*command : nullptr, mine, task.round, seed,
                     global, absl::MakeSpan(local), stop);
    if (slowdown > 1 && training.ok() && training->command_failed.ok()) {
      SleepUnlessStopped(clock, (clock->Now() - training_start) * (slowdown - 1), stop);
    }
    if (Stopped(stop)) {
      leave(task.round);
      break;
    }
    SEXTANT_RETURN_IF_ERROR(training.status());
    LocalRound& trained = *training;
    if (!trained.command_failed.ok()) {
      if (o.log != nullptr) {
        *o.log << "round=" << task.round << " skipped: " << trained.command_failed << "\n"
               << std::flush;
      }
      report_failure(task.round, trained.command_failed);
      // Buffered: the same version comes straight back; do not spin on a failing command.
      if (o.job.buffered) clock->SleepFor(absl::Seconds(1));
      continue;
    }
    SEXTANT_ASSIGN_OR_RETURN(const double weight,
                             ToUpdate(o.job, global, absl::MakeSpan(local), trained.examples));
    const SenderMetrics metrics{trained.train_loss, trained.before.loss, trained.before.accuracy,
                                static_cast<double>(trained.before.examples)};
    const absl::StatusOr<int64_t> sent =
        SendUpdate(o, stub.get(), id, task.round, seed, local, weight, metrics, segments, clock,
                   stop, [&](const absl::Status& why) { report_failure(task.round, why); });
    LogTrainedRound(o.log, task.round, trained, sent);
    if (o.job.buffered) pacing.Trained(task.round, clock->Now(), clock->Now() - training_start);
    if (!sent.ok()) continue;  // e.g. Aborted: the round closed first; wait for the next one
    stats.bytes_sent += *sent;
    ++stats.rounds;
  }
  return stats;
}

std::function<std::shared_ptr<v1::FederationService::StubInterface>()> RedialFromAddressFile(
    std::string address_file, std::string dialled,
    std::shared_ptr<grpc::ChannelCredentials> credentials, bool tls, std::ostream* log) {
  return [file = std::move(address_file), dialled = std::move(dialled),
          credentials = std::move(credentials), tls,
          log]() mutable -> std::shared_ptr<v1::FederationService::StubInterface> {
    const std::string now(absl::StripAsciiWhitespace(ReadFileIfPresent(file).value_or("")));
    if (now.empty() || now.size() > 300 || now == dialled || !CheckDialAllowed(now, tls).ok()) {
      return nullptr;
    }
    if (log != nullptr)
      *log << "aggregator moved: " << dialled << " -> " << now << "\n" << std::flush;
    dialled = now;
    return v1::FederationService::NewStub(DialPeer(now, credentials));
  };
}

}  // namespace sextant
