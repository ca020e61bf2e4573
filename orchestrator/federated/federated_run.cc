#include "orchestrator/federated/federated_run.h"

#include <signal.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "aggregator/federation_plan.h"
#include "aggregator/federation_service.h"
#include "aggregator/secagg_hub.h"
#include "aggregator/tier.h"
#include "common/checkpoint.h"
#include "common/ids.h"
#include "common/mapped_floats.h"
#include "common/status_macros.h"
#include "federation/dp_noise.h"
#include "federation/rdp_accountant.h"
#include "federation/secagg_config.h"
#include "federation/secure_quantizer.h"
#include "federation/server_optimizer.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/fleet_meta.h"
#include "orchestrator/core/results.h"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/stored_spec.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/federated_placement.h"
#include "orchestrator/cost/interruption_sampler.h"
#include "orchestrator/cost/pool_offer.h"
#include "orchestrator/federated/client_selection.h"
#include "orchestrator/federated/federated_billing.h"
#include "orchestrator/federated/federation_settings.h"
#include "orchestrator/federated/global_checkpoint.h"
#include "orchestrator/federated/privacy_budget.h"
#include "orchestrator/federated/global_model.h"
#include "orchestrator/federated/global_score.h"
#include "orchestrator/federated/hand_joins.h"
#include "orchestrator/federated/participants.h"
#include "orchestrator/federated/region_launch.h"
#include "orchestrator/federated/round_failures.h"
#include "orchestrator/federated/run_bill.h"
#include "orchestrator/federated/selection_record.h"
#include "orchestrator/fleet/providers.h"
#include "orchestrator/monitor/run_monitor.h"
#include "rpc/certificates.h"
#include "rpc/key_signer.h"
#include "rpc/run_secret.h"
#include "rpc/server_security.h"
#include "tensors/safetensors.h"
#include "tensors/tensor_file.h"

namespace sextant {
namespace {

// How long an aggregator waits for its clients to connect before its first round.
constexpr double kStartupWaitSeconds = 120;
// How many per-round model files (RUN_DIR/model/round-N.safetensors) are kept.
constexpr int kRoundModelsKept = 3;

// The file of the global model after `round` in RUN_DIR/model.
std::string RoundModelName(int64_t round) {
  return absl::StrFormat("round-%04d.safetensors", round);
}
// A global model in a mapped file (from kFileBackedFloats values on, global_model.h) takes the
// server step kStepRangeFloats (16 MB) at a time.
constexpr size_t kStepRangeFloats = size_t{1} << 22;
// Secure int8 updates: a tensor's range is this many times the largest |value| of its last mean
// update (a client's own update reaches past the mean), and never below kInt8MinRange.
constexpr double kInt8RangeHeadroom = 4;
constexpr double kInt8MinRange = 1e-6;

std::unique_ptr<ServerOptimizer> MakeServerOptimizer(const v1::Federation& f) {
  const double lr = f.server_lr() > 0 ? f.server_lr() : 1.0;
  if (f.server_optimizer() == "fedavgm") return NewFedAvgMOptimizer({lr, 0.9});
  AdaptiveOptions a;
  a.server_lr = lr;
  if (f.server_optimizer() == "fedadam") return NewFedAdamOptimizer(a);
  if (f.server_optimizer() == "fedyogi") return NewFedYogiOptimizer(a);
  if (f.server_optimizer() == "fedadagrad") return NewFedAdagradOptimizer(a);
  return NewFedAvgOptimizer({lr});
}

// One report per sender: a buffered server step may hold several pushes of one region, whose
// counts and rejections add up and whose metrics are averaged by weight (eval_* by eval_weight).
std::vector<SenderReport> MergeBySender(const std::vector<SenderReport>& senders) {
  std::map<std::string, SenderReport> by_id;
  for (const SenderReport& s : senders) {
    auto [it, fresh] = by_id.try_emplace(s.client_id, s);
    if (fresh) continue;
    SenderReport& m = it->second;
    const double w = m.weight + s.weight, e = m.metrics.eval_weight + s.metrics.eval_weight;
    if (w > 0) {
      m.metrics.train_loss =
          (m.metrics.train_loss * m.weight + s.metrics.train_loss * s.weight) / w;
    }
    if (e > 0) {
      m.metrics.eval_loss = (m.metrics.eval_loss * m.metrics.eval_weight +
                             s.metrics.eval_loss * s.metrics.eval_weight) /
                            e;
      m.metrics.eval_accuracy = (m.metrics.eval_accuracy * m.metrics.eval_weight +
                                 s.metrics.eval_accuracy * s.metrics.eval_weight) /
                                e;
    }
    m.metrics.eval_weight = e;
    m.weight = w;
    m.count += s.count;
    m.rejected += s.rejected;
  }
  std::vector<SenderReport> out;
  for (auto& [id, s] : by_id) out.push_back(std::move(s));
  return out;
}

// How long a signed plan for participants started by hand is valid (JoinPlan.expires_at).
constexpr absl::Duration kPlanLifetime = absl::Hours(24 * 30);

class FederatedRun {
 public:
  explicit FederatedRun(RunSession& session)
      : session_(session),
        options_(session.options()),
        env_(session.env()),
        spec_(session.spec()),
        run_dir_path_(session.path()),
        run_dir_(&session.run_dir()),
        store_(&session.store()),
        selection_(store_),
        model_(std::filesystem::absolute(session.run_dir().path() + "/federation").string()),
        hand_joins_(spec_, options_.external_participants),
        bill_(spec_, store_, env_.clock, &hand_joins_),
        failures_(spec_.federation(), store_, env_.out, env_.clock),
        start_(env_.clock->Now()) {
    // Participants run where their pools' providers say (Slurm jobs, processes here, or hosts
    // where they are started by hand); without pools, where resources.provider says. The
    // loader admits local, slurm and static pools only, which are always made.
    const ProviderOptions where{Bin(), env_.launcher, options_.slurm_partition,
                                options_.slurm_spot_partition};
    absl::StatusOr<std::unique_ptr<Provider>> provider =
        spec_.resources().pools_size() > 0
            ? MakePoolsProvider(spec_.resources(), where)
            : MakeProvider(spec_.resources().provider() == "slurm" ? "slurm" : "local", where);
    provider_ = provider.ok() ? *std::move(provider) : *MakeProvider("local", where);
    participants_.emplace(ParticipantsEnv{provider_.get(), env_.clock, store_, env_.err,
                                          run_dir_->logs_dir(), options_.time_scale});
    fed_dir_ = std::filesystem::absolute(run_dir_->path() + "/federation").string();
    spec_file_ = fed_dir_ + "/spec.pb";
    score_.emplace(fed(), GlobalScoreEnv{env_.launcher, env_.clock, store_, env_.err, Bin(),
                                         spec_file_, fed_dir_, run_dir_->logs_dir(),
                                         std::filesystem::path(spec_.source_path())
                                             .parent_path()
                                             .string()});
  }

  absl::Status Main() {
    absl::Status s = Prepare();
    if (s.ok()) s = Rounds();
    // A stop is an interrupt whatever else it broke on its way (a child it reached first).
    if (!s.ok() && !absl::IsCancelled(s) && Stopping()) s = Interrupted(v1::RUN_INTERRUPTED);
    if (session_.monitor()) {
      PublishMetrics();
      session_.monitor()->RunEnded();
    }
    Teardown();
    if (bill_.billing()) {
      bill_.billing()->StopAll();
      if (absl::Status w = bill_.Write(); !w.ok() && s.ok()) s = w;
    }
    return s;
  }

 private:
  const v1::Federation& fed() const { return spec_.federation(); }

  absl::Status Prepare() {
    SEXTANT_RETURN_IF_ERROR(hand_joins_.CheckCredentials(session_.tls_dir()));
    // The federation id names this run to its participants for all its sessions; a run
    // stopped before its first session stored one gets it now (no round has run under another).
    SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> id, store_->GetMeta("federation_id"));
    if (!id) {
      id = absl::StrCat(spec_.name(), "-", absl::ToUnixMicros(env_.clock->Now()));
      SEXTANT_RETURN_IF_ERROR(store_->PutMeta("federation_id", *id));
    }
    experiment_id_ = *id;
    if (auto started = store_->GetTimeMeta("started_at"); started.ok() && *started) {
      start_ = absl::FromUnixMicros(static_cast<int64_t>(std::llround(**started * 1e6)));
    }
    SEXTANT_ASSIGN_OR_RETURN(RoundsTable rounds, RoundsTable::Open(run_dir_->db_path()));
    rounds_ = std::make_unique<RoundsTable>(std::move(rounds));
    optimizer_ = MakeServerOptimizer(fed());
    ckpt_dir_ = std::filesystem::absolute(run_dir_->checkpoints_dir() + "/federation").string();
    std::filesystem::create_directories(fed_dir_);
    // The participants and the evaluator need no trial env; its values may be secrets.
    std::ofstream(spec_file_, std::ios::binary) << WithoutEnvValues(spec_).SerializeAsString();
    if (fed().model_file().empty()) {
      SEXTANT_RETURN_IF_ERROR(score_->StartEvaluator());
      const std::vector<float> initial = score_->evaluator()->initial_weights();
      SEXTANT_RETURN_IF_ERROR(model_.Adopt(initial, score_->evaluator()->layout()));
    } else {
      SEXTANT_RETURN_IF_ERROR(model_.LoadOwn(fed()));
    }
    SEXTANT_RETURN_IF_ERROR(Restore());
    SEXTANT_RETURN_IF_ERROR(PrepareAccountant());
    return StartServer();
  }

  // Client-level DP (privacy_budget.h); a resumed run composes its completed rounds.
  absl::Status PrepareAccountant() {
    SEXTANT_ASSIGN_OR_RETURN(privacy_, PrivacyBudget::Create(fed(), last_round_));
    return absl::OkStatus();
  }
  bool CentralNoise() const { return privacy_ && privacy_->central_noise(); }

  // The global model as safetensors in RUN_DIR/model/NAME (the layout's names and dtypes), written
  // atomically; the meta `model_file` names the newest.
  absl::Status WriteModelFile(const std::string& name) {
    SEXTANT_ASSIGN_OR_RETURN(const std::string path,
                             model_.WriteTo(run_dir_->path() + "/model", name));
    return store_->PutMeta("model_file", path);  // `results --format json` names it
  }

  // RUN_DIR/model/round-NNNN.safetensors after each completed round; the oldest beyond the
  // latest kRoundModelsKept are removed.
  absl::Status WriteRoundModel(int64_t round) {
    SEXTANT_RETURN_IF_ERROR(WriteModelFile(RoundModelName(round)));
    std::error_code ec;
    std::filesystem::remove(
        absl::StrCat(run_dir_->path(), "/model/", RoundModelName(round - kRoundModelsKept)), ec);
    return absl::OkStatus();
  }

  // Payload: see global_checkpoint.h (the round's rows travel with it).
  absl::Status Checkpoint(int64_t round, const std::vector<RoundRow>& rows) {
    // In pieces, the model's a view of its values: no copy of the model is made.
    const GlobalCheckpointPieces c =
        EncodeGlobalCheckpointPieces(round, model_.values(), optimizer_->state(), rows);
    const absl::string_view pieces[] = {c.head, c.model, c.tail};
    const absl::Status s = WriteCheckpoint(ckpt_dir_, round, pieces).status();
    model_.Release();
    return s;
  }

  absl::Status Restore() {
    auto ck = LoadLatestCheckpoint(ckpt_dir_);
    if (!ck.ok()) return absl::OkStatus();  // nothing completed yet
    absl::StatusOr<GlobalCheckpoint> c = DecodeGlobalCheckpoint(ck->payload, model_.size());
    if (!c.ok()) return c.status();
    SEXTANT_RETURN_IF_ERROR(optimizer_->Restore(std::move(c->optimizer)));
    // A kill between the checkpoint and the rounds table's commit left the rows out.
    if (!c->rows.empty()) {
      SEXTANT_RETURN_IF_ERROR(rounds_->Put(c->rows));
    }
    std::copy(c->model.begin(), c->model.end(), model_.values().begin());
    model_.Release();
    last_round_ = c->round;
    // Without an evaluator the last score is the clients' of the committed round (its global
    // row comes first), which no one can compute again.
    if (!c->rows.empty()) {
      score_->Restore(ModelScore{c->rows[0].loss, c->rows[0].accuracy, c->rows[0].clients});
    }
    *env_.out << "sextant: resuming after round " << last_round_ << "\n";
    return selection_.Restore();
  }

  // The global tier: the regions' aggregators send to it. With hide_region_sums its SecAgg hub
  // runs the regions' round, in which the aggregators are the clients.
  absl::Status StartServer() {
    if (fed().reproducible() && model_.size() >= RoundCoordinatorOptions{}.file_staging_from) {
      return absl::InvalidArgumentError(absl::StrCat(
          "federation.reproducible keeps every update of a round in memory until it closes, and "
          "this model's ", model_.size(), " parameters are staged in files instead; set "
          "federation.reproducible: false"));
    }
    TierOptions o;
    o.listen = options_.listen;
    o.coordinator.experiment_id = experiment_id_;
    o.coordinator.model_size = model_.size();
    o.coordinator.staging_dir = fed_dir_;  // a large model's region update is staged there
    o.coordinator.ordered = fed().reproducible();
    o.coordinator.min_updates = std::max(1, fed().min_clients());
    o.coordinator.deadline_seconds = fed().round_deadline_seconds();
    if (Buffered(fed())) {
      o.coordinator.min_updates = fed().buffer_size();
      o.coordinator.deadline_seconds = 0;
      o.coordinator.buffer = StalenessPolicy(fed());
      // Reproducible: a region's second push waits for the next step, whatever its timing.
      o.coordinator.buffer.distinct_senders = fed().reproducible();
    }
    // Only a region's own aggregator speaks for it, for at most its clients.
    for (const auto& r : fed().regions()) o.policy.region_clients[r.name()] = r.clients();
    o.policy.max_client_weight = MaxClientWeight(fed());
    o.secure = fed().hide_region_sums();
    o.secagg.stage_timeout_seconds = StageTimeoutSeconds(fed());
    o.secagg.quantization = BaseQuantization(fed());
    o.secagg.staging_dir = fed_dir_;  // the regions' masked sums are assembled there
    // The session's TLS/mTLS and token rules, as for the worker service (search/search_run.cc).
    ServerSecurity& security = session_.security();
    // Signed anew by every session of the run, each plan valid for kPlanLifetime.
    SEXTANT_RETURN_IF_ERROR(hand_joins_.Serve(
        &o, session_.tls_dir(), experiment_id_, env_.clock->Now(), kPlanLifetime,
        [&](const v1::FederatedRegion& r) {
          return AggregatorFlags(fed(), r, experiment_id_, model_.size());
        }));
    if (!hand_joins_.all() && !session_.tls_dir().empty()) {
      if (absl::Status s = IssueParticipantCertificates(Launch(), &security); !s.ok()) {
        return absl::InvalidArgumentError(s.message());
      }
    }
    o.credentials = MakeServerCredentials(security);
    SEXTANT_ASSIGN_OR_RETURN(tier_, Tier::Start(std::move(o), env_.clock));
    return absl::OkStatus();
  }

  std::string Bin() const { return session_.worker_binary(); }

  // How this run starts its own participants (region_launch.h).
  RegionLaunch Launch() const {
    RegionLaunch l;
    l.spec = &spec_;
    l.hand_joins = &hand_joins_;
    l.worker_binary = Bin();
    l.tls_dir = session_.tls_dir();
    l.secret_file = session_.secrets().worker_file;
    l.fed_dir = fed_dir_;
    l.logs_dir = run_dir_->logs_dir();
    l.experiment_id = experiment_id_;
    l.spec_file = spec_file_;
    l.model_size = model_.size();
    l.startup_wait_seconds = kStartupWaitSeconds;
    l.clock = env_.clock;
    return l;
  }

  // The quantisation of the next secure round. int8 updates go at 8 bits: under DP in the clip
  // that covers C and the noise; otherwise each tensor in its own range, sized from the last
  // round's mean update (SegmentClipsFromMean, with kInt8RangeHeadroom), so that the step
  // follows the updates as they shrink. The first round (and the first after a resume) has no
  // mean to size ranges from and goes at 16 bits.
  SecAggQuantization RoundQuantization() const {
    SecAggQuantization q = BaseQuantization(fed());
    if (fed().update_compression() != "int8") return q;
    if (fed().has_dp()) {
      q.bits = 8;
    } else if (!int8_ranges_.empty()) {
      q.bits = 8;
      q.segments = LayoutSegments(model_.layout());
      q.segment_clips = int8_ranges_;
    }
    return q;
  }

  // Seconds since the run started: round rows, the wall-time budget, messages.
  double Seconds() const { return absl::ToDoubleSeconds(env_.clock->Now() - start_); }
  // An event's time: unix seconds, as every other writer of the events table records it and
  // as `sextant events`, `status` and the report read it.
  double EventTime() const { return absl::ToUnixMicros(env_.clock->Now()) / 1e6; }

  // The ring of every secure sum when the regions' sums are hidden: it holds all clients' total.
  int RegionsRingBits() const {
    const SecAggQuantization q = RoundQuantization();
    return SecureQuantizer::RequiredRingBits(q.bits, TotalClients(fed()), q.max_weight);
  }

  // Starts billing, then the participants of each region not started by hand.
  absl::Status LaunchParticipants() {
    SEXTANT_RETURN_IF_ERROR(StartBilling());
    std::filesystem::create_directories(run_dir_->logs_dir());
    return LaunchRegions(Launch(), tier_->port(), *participants_);
  }

  // Opens the regions' round `round` on secagg (every region takes part, with zeros when none
  // of its clients was sampled); the tier opens it before the round is published, so that no
  // region finds it closed.
  absl::Status OpenRegionsRound(SecAggHub& secagg, int64_t round) {
    secagg.SetQuantization(RoundQuantization());
    std::vector<std::string> regions;
    for (const auto& r : fed().regions()) regions.push_back(r.name());
    SEXTANT_ASSIGN_OR_RETURN(
        SecAggConfig config,
        RegionalLayerConfig(experiment_id_, round, static_cast<int32_t>(regions.size()),
                            RegionsRingBits(), model_.size() + 1,
                            fed().seed() * 0x2545F4914F6CDD1DULL + static_cast<uint64_t>(round)));
    return secagg.OpenWithConfig(std::move(regions), std::move(config), 0, 1);
  }

  absl::Status PublishRound(int64_t round) {
    const std::string file = absl::StrCat(fed_dir_, "/global-", round, ".f32");
    {
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(model_.values().data()),
                model_.size() * sizeof(float));
      if (!out) return absl::InternalError(absl::StrCat("cannot write ", file));
    }
    model_.Release();
    std::map<std::string, RoundTask> tasks;
    const SecAggQuantization quantization = RoundQuantization();
    auto task_of = [&](const std::string& region) -> RoundTask& {
      RoundTask& t = tasks[region];
      t.model_size = static_cast<int64_t>(model_.size());
      t.seed = fed().seed() * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(round);
      t.deadline_seconds = fed().round_deadline_seconds();
      if (fed().secure_aggregation()) {
        t.quantizer_bits = quantization.bits;
        t.segments = quantization.segments;
        t.segment_clips = quantization.segment_clips;
      } else if (fed().update_compression() == "int8") {
        t.segments = LayoutSegments(model_.layout());  // the aggregators hold int8 updates to them
      }
      return t;
    };
    // Every region takes part in the regions' round, those without a sampled client too.
    if (fed().hide_region_sums()) {
      for (const auto& r : fed().regions()) task_of(r.name());
    }
    const std::vector<Participant> chosen = selection_.Select(fed(), round);
    for (const Participant& p : chosen) {
      task_of(p.region).participants.push_back(ClientId(p.region, p.index));
    }
    if (!Buffered(fed())) {
      SEXTANT_RETURN_IF_ERROR(selection_.Record(fed(), round, chosen, EventTime()));
    }
    // Each region may close at the deadline once it is short by no more than the round's slack
    // (sampled - min_clients): with one region that is min_clients itself, and the global tier
    // still waits until min_clients are in over all regions.
    int64_t sampled = 0;
    for (const auto& [region, t] : tasks) sampled += static_cast<int64_t>(t.participants.size());
    const int64_t slack = std::max<int64_t>(0, sampled - std::max(1, fed().min_clients()));
    for (auto& [region, t] : tasks) {
      t.min_updates = std::max<int64_t>(1, static_cast<int64_t>(t.participants.size()) - slack);
      // Buffered: each region pushes its share of a server step's buffer_size updates.
      if (Buffered(fed()))
        t.min_updates = RegionBufferSize(fed(), static_cast<int64_t>(t.participants.size()));
    }
    RoundPlan plan;
    plan.round = round;
    plan.model_path = file;
    plan.tasks = std::move(tasks);
    plan.deadline_seconds = Buffered(fed()) ? 0 : fed().round_deadline_seconds();
    plan.min_updates = Buffered(fed()) ? fed().buffer_size() : std::max(1, fed().min_clients());
    if (fed().hide_region_sums()) {
      // The regions' sum holds every client's update: the orchestrator never sees a region's.
      plan.open_secure = [this, round](SecAggHub& secagg) {
        return OpenRegionsRound(secagg, round);
      };
      plan.decode_max_clients = TotalClients(fed());
    }
    SEXTANT_RETURN_IF_ERROR(tier_->OpenRound(std::move(plan)));
    published_round_ = round;
    return absl::OkStatus();
  }

  // Finishes one closed round: server step, evaluation, checkpoint, rows. OK, or the first
  // step's error (the run ends with it).
  absl::Status CompleteRound(int64_t round, const RoundOutcome& outcome,
                             const std::vector<SenderReport>& senders) {
    if (fed().secure_aggregation() && fed().update_compression() == "int8" && !fed().has_dp()) {
      int8_ranges_ = SegmentClipsFromMean(outcome.mean, LayoutSegments(model_.layout()),
                                          kInt8RangeHeadroom, kInt8MinRange);
    }
    // A copy of the mean only to add central noise to; otherwise the step reads it in place.
    std::vector<float> noisy;
    if (CentralNoise()) {
      noisy.assign(outcome.mean.begin(), outcome.mean.end());
      SEXTANT_RETURN_IF_ERROR(
          privacy_->AddCentralNoise(absl::MakeSpan(noisy), outcome.total_weight));
    }
    // A file-backed model is stepped a range at a time, each range's pages given back at once.
    SEXTANT_RETURN_IF_ERROR(optimizer_->Step(model_.values(), CentralNoise() ? noisy : outcome.mean,
                                             kStepRangeFloats, [&](size_t at, size_t n) {
                                               model_.Release(at, n);
                                             }));
    // The round's mean is spent: a large model's evaluation, checkpoint and files then read the
    // model without the mean beside it in memory.
    if (model_.mapped() && !Buffered(fed()) && !fed().hide_region_sums())
      tier_->ReleaseOutcome();
    std::optional<double> epsilon;
    if (privacy_) epsilon = privacy_->ComposeThrough(round);
    std::vector<RoundRow> rows;
    SEXTANT_RETURN_IF_ERROR(score_->AfterRound(round, outcome.metrics, model_));
    const ModelScore& score = score_->last();
    // Rejections: regional updates turned away here plus client updates each region rejected.
    int64_t rejected = outcome.rejected;
    for (const SenderReport& s : senders) rejected += s.rejected;
    rows.push_back({round, "", score.accuracy, score.loss, outcome.count, rejected,
                    epsilon, Seconds()});
    for (const SenderReport& s : MergeBySender(senders)) {
      rows.push_back({round, s.client_id, s.metrics.eval_accuracy, s.metrics.eval_loss, s.count,
                      s.rejected, std::nullopt, Seconds()});
    }
    RecordRegionsSittingOut(round, rows);
    // The checkpoint is the commit point and carries the rows: a round is listed only once it
    // is committed (so a listed round is never redone with other values), and a kill before
    // the rows reach the table is repaired from the checkpoint on resume.
    SEXTANT_RETURN_IF_ERROR(Checkpoint(round, rows));
    SEXTANT_RETURN_IF_ERROR(WriteRoundModel(round));
    SEXTANT_RETURN_IF_ERROR(rounds_->Put(rows));
    if (epsilon) {
      SEXTANT_RETURN_IF_ERROR(store_->PutMeta("privacy", privacy_->ToJson(round)));
    }
    std::string line =
        absl::StrFormat("round=%d accuracy=%.4f loss=%.4f clients=%d rejected=%d", round,
                        score.accuracy, score.loss, outcome.count, rejected);
    if (epsilon) absl::StrAppendFormat(&line, " epsilon=%.4f", *epsilon);
    if (failures_.clients_failed() > 0) {
      absl::StrAppend(&line, " failed=", failures_.clients_failed());
    }
    if (options_.federated_trial) {
      // The trial's metrics at this fidelity (search.fidelity.name: rounds), for its worker.
      absl::StrAppendFormat(&line, " rounds=%d val_accuracy=%.17g val_loss=%.17g", round,
                            score.accuracy, score.loss);
    }
    (void)store_->AddEvent(EventTime(), "round", 0, line);
    *env_.out << "sextant: " << line << "\n" << std::flush;
    last_round_ = round;
    PublishMetrics();
    return absl::OkStatus();
  }

  // ResourceExhausted (with the message) when the next round would pass the epsilon target.
  absl::Status CheckPrivacyBudget() const {
    return privacy_ ? privacy_->CheckNextRound() : absl::OkStatus();
  }

  bool Stopping() const { return session_.stop_signal() != 0; }

  absl::Status Rounds() {
    *env_.out << "sextant: federated run " << spec_.name() << " in " << run_dir_path_ << ": "
              << fed().regions_size() << " regions, " << TotalClients(fed()) << " clients, "
              << model_.size() << " parameters, ";
    if (last_round_ < fed().rounds()) {
      *env_.out << "rounds " << last_round_ + 1 << ".." << fed().rounds() << "\n";
    } else {
      *env_.out << "all " << fed().rounds() << " rounds already done\n";
    }
    *env_.out << std::flush;
    PutTrial(v1::RUNNING);
    PublishMetrics();
    if (absl::Status s = CheckPrivacyBudget(); !s.ok()) return EpsilonReached(s);
    if (last_round_ < fed().rounds()) {
      SEXTANT_RETURN_IF_ERROR(PublishRound(last_round_ + 1));
      SEXTANT_RETURN_IF_ERROR(LaunchParticipants());
      if (hand_joins_.any()) hand_joins_.Announce(*env_.out, tier_->port(), experiment_id_);
      SEXTANT_RETURN_IF_ERROR(AwaitRegions());
      if (bill_.billing()) bill_.billing()->RoundsBegin();
    }
    for (int64_t round = last_round_ + 1; round <= fed().rounds(); ++round) {
      // A stop takes effect at the round boundary too, not only while a round waits.
      if (absl::Status stop = Interruption(); !stop.ok()) return StoppedBy(stop);
      if (absl::Status s = CheckPrivacyBudget(); !s.ok()) return EpsilonReached(s);
      if (absl::Status s = bill_.CheckBefore(round, last_round_, EventTime(), *env_.out); !s.ok()) {
        return StoppedBy(s);
      }
      if (round != published_round_) {
        SEXTANT_RETURN_IF_ERROR(PublishRound(round));
      }
      absl::Status ready = tier_->AwaitClosable(
          fed().hide_region_sums() ? Tier::Close::kSecure : Tier::Close::kPlain,
          [&] { return Interruption(); });
      if (!ready.ok()) return StoppedBy(ready);
      ShowFailures();
      std::vector<SenderReport> senders;
      std::vector<float> regions_mean;
      absl::StatusOr<RoundOutcome> outcome;
      if (absl::StatusOr<ClosedRound> closed = tier_->TakeRound(); closed.ok()) {
        outcome = closed->outcome;
        senders = std::move(closed->senders);
      } else {
        outcome = closed.status();
      }
      // A synchronous round whose participants failed: no update, or too few to count.
      if (!fed().hide_region_sums() && !Buffered(fed()) &&
          (!outcome.ok() || outcome->count < std::max(1, fed().min_clients()))) {
        SEXTANT_RETURN_IF_ERROR(RoundFailed(round, outcome.ok() ? outcome->count : 0));
        continue;
      }
      if (!outcome.ok()) {
        return (fed().hide_region_sums()
                    ? absl::AbortedError(absl::StrCat("the regions' secure round ", round,
                                                      " failed: ", outcome.status().message()))
                    : outcome.status());
      }
      SEXTANT_RETURN_IF_ERROR(selection_.Observe(senders));
      if (Buffered(fed())) {
        // Copied out, so that the next buffer fills while this one is applied and evaluated.
        regions_mean.assign(outcome->mean.begin(), outcome->mean.end());
        outcome->mean = regions_mean;
        tier_->hub().ResumeBuffering();
      }
      if (bill_.billing()) bill_.billing()->MeterTransfer(tier_->transfer().Totals());
      SEXTANT_RETURN_IF_ERROR(CompleteRound(round, *outcome, senders));
      SEXTANT_RETURN_IF_ERROR(bill_.CloseRound(round, EventTime()));
      failures_.RoundCompleted();
      if (round == options_.pause_after_round && round < fed().rounds()) return PausedAtRung();
    }
    return Finish();
  }

  // With resources.pools, bills the run (RunBill); the participants this run starts are
  // billed on their pools and taken back at their markets from their launch, those started by
  // hand as they join (HandJoins::Bill).
  absl::Status StartBilling() {
    SEXTANT_RETURN_IF_ERROR(bill_.Start(start_, &*participants_));
    if (bill_.billing() && !hand_joins_.all()) {
      participants_->SetMarket(bill_.billing()->placement(), bill_.billing(),
                               SpotMarketSeed(fed(), last_round_));
    }
    return absl::OkStatus();
  }

  // A synchronous plaintext round closes without the regions whose aggregate did not come (an
  // aggregator preempted or failed, its replacement not yet in): each sits the round out, and the
  // rounds table says so with a row of no clients and no scores (results: "sat_out"), an event
  // and a console line. Under hide_region_sums the regions' round has no per-region rows.
  void RecordRegionsSittingOut(int64_t round, std::vector<RoundRow>& rows) {
    if (Buffered(fed()) || fed().hide_region_sums()) return;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const v1::FederatedRegion& r : fed().regions()) {
      bool in = false;
      for (const RoundRow& row : rows) in = in || row.region == r.name();
      if (in) continue;
      rows.push_back({round, r.name(), nan, nan, 0, 0, std::nullopt, Seconds()});
      const std::string line =
          absl::StrCat("round ", round, ": region ", r.name(), " sat the round out (no aggregate)");
      (void)store_->AddEvent(EventTime(), "region_sat_out", 0, line);
      *env_.out << "sextant: " << line << "\n" << std::flush;
    }
  }

  // Says each failure the participants reported since the last call, and a round waiting past
  // its deadline for too few updates (RoundFailures::Show).
  void ShowFailures() {
    failures_.Show(tier_->hub().TakeFailures(), tier_->hub().Progress(), last_round_);
  }

  // Round `round` closed with `count` client updates, fewer than min_clients: the model stays
  // as it was, and the next round goes on, unless max_failed_rounds rounds in a row failed.
  absl::Status RoundFailed(int64_t round, int64_t count) {
    ShowFailures();
    std::optional<std::string> why = failures_.RoundFailed(round, count, run_dir_->logs_dir());
    return why ? Failed(*why) : absl::OkStatus();
  }

  // The run cannot go on: it ends FAILED, with why, and the caller exits 1. The last completed
  // round's model stays (checkpoint and models/).
  absl::Status Failed(const std::string& why) {
    PutTrial(v1::FAILED);
    SEXTANT_RETURN_IF_ERROR(RecordEnd(v1::RUN_FAILED, why));
    return absl::AbortedError(absl::StrCat("the federated run failed: ", why));
  }

  // The run's final state, its end time and its run_finished event (Store::EndRun).
  absl::Status RecordEnd(v1::RunState state, const std::string& why = "") {
    return store_->EndRun(state, absl::ToUnixMicros(env_.clock->Now()) / 1e6, why);
  }

  // Waits until every region's aggregator has asked for the round just published (it asks
  // once its clients are up, or after its own startup wait), then starts that round's deadline
  // afresh: a deadline that ran while the participants were starting would close the first
  // round without the slow starters, as if they were dead. OK once they have, or the
  // interruption's status (Ctrl-C, the budget).
  absl::Status AwaitRegions() {
    std::vector<std::string> regions;
    for (const auto& r : fed().regions()) regions.push_back(r.name());
    // Participants started by hand come when their hosts' people start them: no time limit.
    const absl::Duration wait = hand_joins_.any()
                                    ? absl::InfiniteDuration()
                                    : absl::Seconds(kStartupWaitSeconds + 60);
    absl::StatusOr<std::vector<std::string>> missing =
        tier_->AwaitContact(regions, wait, [&] { return Interruption(); });
    if (!missing.ok()) return StoppedBy(missing.status());
    tier_->hub().RestartDeadline();
    (void)store_->AddEvent(
        EventTime(), "federation_ready", 0,
        missing->empty() ? absl::StrFormat("every region's clients are up after %.1f s", Seconds())
                         : absl::StrCat("regions not up when round ", published_round_,
                                        "'s deadline started: ", absl::StrJoin(*missing, ", ")));
    return absl::OkStatus();
  }

  // Why a wait must end now: a stop (Cancelled), the wall-time budget (ResourceExhausted) or an
  // aggregator that exited (Unavailable); OK to go on waiting.
  absl::Status Interruption() {
    hand_joins_.Bill(bill_.billing(), store_, EventTime());
    PublishMetrics();  // waits poll this often
    if (tier_) ShowFailures();
    if (Stopping()) return absl::CancelledError("asked to stop");
    if (PastWallBudget() || bill_.Reached(published_round_, last_round_, EventTime(), *env_.out)) {
      return absl::ResourceExhaustedError("the wall-time or cost budget is spent");
    }
    if (!AggregatorsAlive()) return AggregatorExited();
    return absl::OkStatus();
  }

  // The exit code for a wait that Interruption() ended.
  absl::Status StoppedBy(const absl::Status& why) {
    if (absl::IsCancelled(why)) return Interrupted(v1::RUN_INTERRUPTED);
    if (absl::IsResourceExhausted(why)) return Interrupted(v1::RUN_BUDGET_EXHAUSTED);
    return why;
  }

  // True once the run has used its budget's max_wall_time (none: never).
  bool PastWallBudget() const {
    const double wall = spec_.budget().max_wall_time_seconds();
    return wall > 0 && Seconds() > wall;
  }

  absl::Status AggregatorExited() const {
    return absl::UnavailableError(
        absl::StrCat("an aggregator exited; see ", run_dir_->logs_dir(), "/aggregator-*.log"));
  }

  bool AggregatorsAlive() { return participants_->Poll(); }

  // The run as one trial whose fidelity is rounds; its workers are the client processes alive,
  // busy while sampled for the round in progress.
  void PublishMetrics() {
    RunMonitor* monitor = session_.monitor();
    if (monitor == nullptr) return;
    MetricsSnapshot m = monitor->Snapshot();
    m.max_trials = 1;
    if (trial_.id != 0) m.by_state[TrialStateName(trial_.state)] = 1;  // once stored
    if (trial_.value) {
      m.best_value = trial_.value;
      m.best_trial = trial_.id;
    }
    m.rounds_max = static_cast<int>(fed().rounds());
    m.rounds_done = static_cast<int>(last_round_);
    m.workers = participants_->clients();
    if (published_round_ > last_round_) {
      m.busy_workers = static_cast<int>(std::min<int64_t>(ClientsPerRound(fed()), m.workers));
    }
    if (bill_.billing()) {
      m.spend = bill_.billing()->Committed();
      m.transfer_spend = bill_.billing()->transfer();
      m.participant_preemptions = bill_.Preemptions();
    }
    if (spec_.budget().has_max_cost()) m.budget = spec_.budget().max_cost();
    monitor->Publish(m);
  }

  void PutTrial(v1::TrialState state) {
    TrialRow t;
    t.id = 1;
    t.state = state;
    t.params_json = "{}";
    t.attempts = 1;
    t.created_at = absl::ToUnixMicros(start_) / 1e6;
    t.fidelity = static_cast<double>(std::max<int64_t>(last_round_, 0));
    t.preemptions = bill_.Preemptions();
    if (state == v1::COMPLETED) {
      const bool loss = spec_.objective().metric().find("loss") != std::string::npos;
      t.value = loss ? score_->last().loss : score_->last().accuracy;
    }
    if (state == v1::COMPLETED || state == v1::FAILED) {
      t.finished_at = absl::ToUnixMicros(env_.clock->Now()) / 1e6;
    }
    (void)store_->PutTrial(t);
    trial_ = t;
  }

  // The epsilon target is reached: the run ends normally before the round that would pass it.
  absl::Status EpsilonReached(const absl::Status& why) {
    score_->EvaluateAgainIfNone(last_round_, model_.values());  // resumed: evaluate again
    if (last_round_ >= 1) SEXTANT_RETURN_IF_ERROR(WriteModelFile("final.safetensors"));
    PutTrial(v1::COMPLETED);
    const std::string line = absl::StrCat("stopped after round ", last_round_,
                                          ": the privacy budget is spent (", why.message(), ")");
    SEXTANT_RETURN_IF_ERROR(RecordEnd(v1::RUN_EPSILON_EXHAUSTED, line));
    *env_.out << "sextant: " << spec_.name() << " " << line
              << "; val_accuracy=" << absl::StrFormat("%.4f", score_->last().accuracy)
              << SpentMetrics() << "\n";
    return absl::OkStatus();
  }

  absl::Status Interrupted(v1::RunState state) {
    // The budget ends the run normally: its model is final. An interrupted run resumes.
    if (state != v1::RUN_INTERRUPTED && last_round_ >= 1) {
      SEXTANT_RETURN_IF_ERROR(WriteModelFile("final.safetensors"));
    }
    (void)store_->SetRunState(state);
    *env_.out << "sextant: stopped after round " << last_round_
              << "; continue with: sextant resume " << run_dir_path_ << "\n";
    return state == v1::RUN_INTERRUPTED ? absl::CancelledError("interrupted") : absl::OkStatus();
  }

  // A federated trial reached its scheduler's rung: it stops after this round, resumable (its
  // checkpoint holds the global model, the server optimiser, the rounds and the privacy spent),
  // and exits 0 with its metrics so that the scheduler pauses it there; a promotion resumes it.
  absl::Status PausedAtRung() {
    PutTrial(v1::RUNNING);
    SEXTANT_RETURN_IF_ERROR(RecordEnd(
        v1::RUN_INTERRUPTED, absl::StrCat("paused after round ", last_round_, " (the rung)")));
    *env_.out << absl::StrFormat(
        "sextant: %s paused after round %d (its rung): val_accuracy=%.4f val_loss=%.4f%s\n",
        spec_.name(), last_round_, score_->last().accuracy, score_->last().loss, SpentMetrics());
    return absl::OkStatus();
  }

  absl::Status Finish() {
    // Every round failed: there is no model to report, and no score (never a made-up 0).
    if (last_round_ == 0) {
      return Failed(absl::StrCat(
          "no round completed: every one of the ", fed().rounds(), " rounds failed",
          failures_.last_failure().empty() ? "" : " (last: ", failures_.last_failure(),
          failures_.last_failure().empty() ? "" : ")",
          ". Each participant's log is in ", run_dir_->logs_dir()));
    }
    if (failures_.failed_in_a_row() > 0) {
      *env_.out << "sextant: the last " << failures_.failed_in_a_row()
                << " rounds failed; the model is round "
                << last_round_ << "'s\n";
    }
    score_->EvaluateAgainIfNone(last_round_, model_.values());  // resumed at the end
    if (last_round_ >= 1) SEXTANT_RETURN_IF_ERROR(WriteModelFile("final.safetensors"));
    PutTrial(v1::COMPLETED);
    SEXTANT_RETURN_IF_ERROR(RecordEnd(v1::RUN_COMPLETED));
    *env_.out << absl::StrFormat(
        "sextant: %s finished: val_accuracy=%.4f val_loss=%.4f%s after %d rounds\n", spec_.name(),
        score_->last().accuracy, score_->last().loss, SpentMetrics(), last_round_);
    return absl::OkStatus();
  }

  // What the run spent, as metrics on its last line, so that a federated search can take them
  // as objectives or constraints: " cost=D" (compute and transfer, when billed) and
  // " epsilon=E" (at the experiment's delta, with DP); empty when neither applies.
  std::string SpentMetrics() const {
    std::string out;
    if (bill_.billing())
      absl::StrAppend(&out, absl::StrFormat(" cost=%.17g", bill_.billing()->Committed()));
    if (privacy_) absl::StrAppend(&out, absl::StrFormat(" epsilon=%.17g", privacy_->epsilon()));
    return out;
  }

  // Ends the experiment for every participant, then stops what is left. The grace covers a
  // loaded machine: DONE reaches a client through its aggregator's next poll, and a client
  // still in a secure-aggregation stage learns it only when that stage's poll returns.
  void Teardown() {
    if (tier_) {
      tier_->hub().SetDone();
      if (fed().hide_region_sums()) tier_->secagg().SetDone();
    }
    participants_->StopAll(absl::Seconds(15));
    // Aggregators started by hand are no children of this run: the server stays up until each
    // has been told the run ended, so that none finds it gone mid-call.
    if (tier_) {
      tier_->Shutdown(hand_joins_.any() ? absl::Seconds(15) : absl::ZeroDuration());
    }
  }

  RunSession& session_;
  const RunOptions& options_;
  const RunEnv env_;
  const v1::ExperimentSpec& spec_;
  const std::string run_dir_path_;
  RunDir* const run_dir_;
  Store* const store_;
  std::string fed_dir_, ckpt_dir_, experiment_id_;
  std::unique_ptr<RoundsTable> rounds_;
  SelectionRecord selection_;  // federation.client_selection's speeds and counts
  std::string spec_file_;  // the experiment, for the participants and the evaluator
  std::optional<GlobalScore> score_;  // the global model's score (made in the constructor)
  GlobalModel model_;  // in memory, or a mapped file in the federation folder
  // Secure int8 updates: each tensor's range in the next round (RoundQuantization); empty until a
  // round completed in this process.
  std::vector<double> int8_ranges_;
  std::unique_ptr<ServerOptimizer> optimizer_;
  std::optional<PrivacyBudget> privacy_;  // with federation.dp
  HandJoins hand_joins_;         // its join handlers outlive the tier that calls them
  std::unique_ptr<Tier> tier_;  // the global tier of the rounds
  // The participants' instances and the regions' transfer, with resources.pools; else null.
  RunBill bill_;  // with resources.pools: the participants' instances and the transfer
  int64_t last_round_ = 0;
  int64_t published_round_ = -1;
  RoundFailures failures_;  // the participants' failures and the rounds that failed
  absl::Time start_;
  std::unique_ptr<Provider> provider_;         // where participants_ run
  std::optional<Participants> participants_;  // from the constructor on
  TrialRow trial_;                            // the run as trial 1, as last stored
};

}  // namespace

absl::Status RunFederated(RunSession& session) { return FederatedRun(session).Main(); }

}  // namespace sextant
