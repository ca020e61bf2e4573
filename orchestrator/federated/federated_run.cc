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
#include "common/error_line.h"
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
#include "orchestrator/federated/evaluate_command.h"
#include "orchestrator/federated/federated_billing.h"
#include "orchestrator/federated/global_checkpoint.h"
#include "orchestrator/federated/privacy_budget.h"
#include "orchestrator/federated/global_evaluator.h"
#include "orchestrator/federated/participants.h"
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
// How long the evaluator may take to build the model and load the validation split, and to
// score one model.
constexpr absl::Duration kEvaluatorStartup = absl::Seconds(120);
constexpr absl::Duration kEvaluationTimeout = absl::Seconds(600);
// How many per-round model files (RUN_DIR/model/round-N.safetensors) are kept.
constexpr int kRoundModelsKept = 3;
// How long participants take to exit once the run is over, as the budget counts it: each
// live instance is billed that much after the last round (measured: under 1 s on loopback,
// bench/federated/cost/budget_bench.py).
constexpr absl::Duration kParticipantWindDown = absl::Seconds(2);
// From this many values (256 MB) the global model lives in a mapped file (AllocateGlobal), as
// the tier stages a region's update of that size in a file; the server step then goes
// kStepRangeFloats (16 MB) at a time.
constexpr size_t kFileBackedFloats = size_t{1} << 26;
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
    for (const v1::FederatedRegion& r : fed().regions()) {
      if (options_.external_participants || StaticRegion(r.name())) hand_joined_.insert(r.name());
    }
    participants_.emplace(ParticipantsEnv{provider_.get(), env_.clock, store_, env_.err,
                                          run_dir_->logs_dir(), options_.time_scale});
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
    if (billing_) {
      billing_->StopAll();
      if (absl::Status w = WriteCosts(); !w.ok() && s.ok()) s = w;
    }
    return s;
  }

 private:
  const v1::Federation& fed() const { return spec_.federation(); }

  // True when every pool of `region` (at least one) is static: its participants are started
  // by hand and join (`--join`).
  bool StaticRegion(const std::string& region) const {
    const v1::Resources& res = spec_.resources();
    bool any = false;
    for (const v1::Pool& p : res.pools()) {
      if (p.region() != region) continue;
      if (PoolProvider(res, p) != "static") return false;
      any = true;
    }
    return any;
  }
  bool HandJoined(const std::string& region) const { return hand_joined_.contains(region); }
  // Every region's participants are started by hand: the run launches none.
  bool AllHandJoined() const {
    return static_cast<int>(hand_joined_.size()) == fed().regions_size();
  }

  absl::Status Prepare() {
    if (!hand_joined_.empty() && session_.tls_dir().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the participants of region ", *hand_joined_.begin(),
          " are started by hand (its pools are static) and join with certificates: run with "
          "--tls-dir DIR (`sextant certs init DIR`)"));
    }
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
    fed_dir_ = std::filesystem::absolute(run_dir_->path() + "/federation").string();
    ckpt_dir_ = std::filesystem::absolute(run_dir_->checkpoints_dir() + "/federation").string();
    std::filesystem::create_directories(fed_dir_);
    spec_file_ = fed_dir_ + "/spec.pb";
    // The participants and the evaluator need no trial env; its values may be secrets.
    std::ofstream(spec_file_, std::ios::binary) << WithoutEnvValues(spec_).SerializeAsString();
    if (fed().model_file().empty()) {
      SEXTANT_RETURN_IF_ERROR(StartEvaluator());
      const std::vector<float> initial = evaluator_->initial_weights();
      SEXTANT_RETURN_IF_ERROR(AllocateGlobal(initial.size()));
      std::copy(initial.begin(), initial.end(), global_.begin());
      layout_ = evaluator_->layout();
    } else {
      SEXTANT_RETURN_IF_ERROR(LoadOwnModel());
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

  // federation.model.file: its tensors widened to f32 are the first global model. The file must
  // still have the layout the loader read from its header.
  absl::Status LoadOwnModel() {
    SEXTANT_ASSIGN_OR_RETURN(TensorFile model, ReadSafetensorsLayout(fed().model_file()));
    bool same = model.tensors.size() == static_cast<size_t>(fed().model_layout_size());
    for (size_t i = 0; same && i < model.tensors.size(); ++i) {
      const Tensor& t = model.tensors[i];
      const v1::TensorLayout& l = fed().model_layout(static_cast<int>(i));
      same = t.name == l.name() && DTypeName(t.dtype) == l.dtype() &&
             std::equal(t.shape.begin(), t.shape.end(), l.shape().begin(), l.shape().end());
    }
    if (!same) {
      return absl::FailedPreconditionError(absl::StrCat(
          fed().model_file(), ": its tensors changed since the experiment was loaded"));
    }
    // Read a chunk at a time into the flat model: a model of many gigabytes costs itself once.
    SEXTANT_ASSIGN_OR_RETURN(const int64_t elements, LayoutElements(model));
    SEXTANT_RETURN_IF_ERROR(AllocateGlobal(static_cast<size_t>(elements)));
    SEXTANT_RETURN_IF_ERROR(ReadSafetensorsToF32(fed().model_file(), model, global_));
    ReleaseGlobal();
    layout_ = std::move(model);
    return absl::OkStatus();
  }

  // The global model's memory: from kFileBackedFloats on, a file in the run's federation folder
  // mapped into memory, whose pages go back to the system after each pass over the model
  // (ReleaseGlobal) and, in the server step, after each range; so the model is resident only
  // while it is read or written, never together with the round's mean.
  absl::Status AllocateGlobal(size_t n) {
    if (n >= kFileBackedFloats) {
      SEXTANT_ASSIGN_OR_RETURN(MappedFloats file,
                               MappedFloats::Create(fed_dir_ + "/global.f32", n));
      global_file_.emplace(std::move(file));
      global_ = global_file_->span();
    } else {
      global_memory_.assign(n, 0.0f);
      global_ = absl::MakeSpan(global_memory_);
    }
    return absl::OkStatus();
  }
  void ReleaseGlobal() {
    if (global_file_) global_file_->Release();
  }

  // The global model as safetensors in RUN_DIR/model/NAME (the layout's names and dtypes), written
  // atomically; the meta `model_file` names the newest.
  absl::Status WriteModelFile(const std::string& name) {
    const std::string dir = run_dir_->path() + "/model";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
    const std::string path =
        std::filesystem::absolute(absl::StrCat(dir, "/", name)).lexically_normal().string();
    SEXTANT_RETURN_IF_ERROR(WriteGlobalModel(path));
    return store_->PutMeta("model_file", path);  // `results --format json` names it
  }

  // The global model as safetensors at path (the layout's names and dtypes).
  absl::Status WriteGlobalModel(const std::string& path) {
    const absl::Status s = WriteSafetensorsFromF32(path, layout_, global_);
    ReleaseGlobal();
    return s;
  }

  // federation.evaluate_command on the global model after `round`: its score becomes
  // last_eval_. A command that fails or prints no score is reported (event evaluate_failed and
  // a line on stderr) and last_eval_ is left as it was: the clients' weighted evaluation.
  void RunEvaluateCommandOn(int64_t round) {
    const std::string dir = fed_dir_ + "/evaluate";
    const std::string model = dir + "/global.safetensors";
    EvaluateCommandOptions o;
    o.argv.assign(fed().evaluate_command().begin(), fed().evaluate_command().end());
    o.working_dir = std::filesystem::path(spec_.source_path()).parent_path().string();
    o.output_dir = dir;
    o.timeout_seconds = absl::ToDoubleSeconds(kEvaluationTimeout);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const absl::Status written = WriteGlobalModel(model);
    absl::StatusOr<PrintedEvaluation> e = written.ok()
                                              ? RunEvaluateCommand(o, round, model, env_.clock)
                                              : absl::StatusOr<PrintedEvaluation>(written);
    if (e.ok()) {
      last_eval_ = ModelScore{e->loss, e->accuracy, std::max<int64_t>(e->examples, 1)};
      return;
    }
    const std::string line =
        absl::StrCat("round ", round, ": ", e.status().message(), " (output in ", dir, "/round-",
                     round, ".out); the round's metrics are the clients' own");
    (void)store_->AddEvent(EventTime(), "evaluate_failed", 0, line);
    *env_.err << "sextant: " << line << "\n" << std::flush;
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

  static std::string RoundModelName(int64_t round) {
    return absl::StrFormat("round-%04d.safetensors", round);
  }

  // Payload: see global_checkpoint.h (the round's rows travel with it).
  absl::Status Checkpoint(int64_t round, const std::vector<RoundRow>& rows) {
    // In pieces, the model's a view of global_: no copy of the model is made.
    const GlobalCheckpointPieces c =
        EncodeGlobalCheckpointPieces(round, global_, optimizer_->state(), rows);
    const absl::string_view pieces[] = {c.head, c.model, c.tail};
    const absl::Status s = WriteCheckpoint(ckpt_dir_, round, pieces).status();
    ReleaseGlobal();
    return s;
  }

  absl::Status Restore() {
    auto ck = LoadLatestCheckpoint(ckpt_dir_);
    if (!ck.ok()) return absl::OkStatus();  // nothing completed yet
    absl::StatusOr<GlobalCheckpoint> c = DecodeGlobalCheckpoint(ck->payload, global_.size());
    if (!c.ok()) return c.status();
    SEXTANT_RETURN_IF_ERROR(optimizer_->Restore(std::move(c->optimizer)));
    // A kill between the checkpoint and the rounds table's commit left the rows out.
    if (!c->rows.empty()) {
      SEXTANT_RETURN_IF_ERROR(rounds_->Put(c->rows));
    }
    std::copy(c->model.begin(), c->model.end(), global_.begin());
    ReleaseGlobal();
    last_round_ = c->round;
    // Without an evaluator the last score is the clients' of the committed round (its global
    // row comes first), which no one can compute again.
    if (!evaluator_ && !c->rows.empty()) {
      last_eval_ = ModelScore{c->rows[0].loss, c->rows[0].accuracy, c->rows[0].clients};
    }
    *env_.out << "sextant: resuming after round " << last_round_ << "\n";
    return RestoreSelection();
  }

  // federation.client_selection's state: the clients' speeds and how often each was selected
  // (meta client_speeds and client_selection, written after every round).
  absl::Status RestoreSelection() {
    SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> speeds, store_->GetMeta("client_speeds"));
    if (speeds) {
      absl::StatusOr<ClientSpeeds> s = ClientSpeeds::FromJson(*speeds);
      if (s.ok()) speeds_ = *std::move(s);
    }
    SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> sel, store_->GetMeta("client_selection"));
    if (sel) {
      nlohmann::json j = nlohmann::json::parse(*sel, nullptr, false);
      if (j.is_object() && j["selected"].is_object()) {
        for (const auto& [id, n] : j["selected"].items()) {
          if (n.is_number_integer()) selected_[id] = n.get<int64_t>();
        }
      }
    }
    return absl::OkStatus();
  }

  // Counts the round's selection (meta client_selection, for `results`) and says it in an event.
  absl::Status RecordSelection(int64_t round, const std::vector<Participant>& chosen) {
    std::vector<std::string> ids;
    for (const Participant& p : chosen) {
      ids.push_back(ClientId(p.region, p.index));
      ++selected_[ids.back()];
    }
    const std::string policy =
        fed().client_selection().empty() ? "random" : fed().client_selection();
    nlohmann::json j = {{"policy", policy}, {"selected", selected_}};
    if (!speeds_.estimates().empty()) j["seconds"] = speeds_.estimates();
    SEXTANT_RETURN_IF_ERROR(store_->PutMeta("client_selection", j.dump()));
    return store_->AddEvent(
        EventTime(), "selection", 0,
        absl::StrCat("round=", round, " policy=", policy, " clients=", absl::StrJoin(ids, ",")));
  }

  // Learns each client's delivery time from its region's report of a closed round.
  absl::Status ObserveSpeeds(const std::vector<SenderReport>& senders) {
    bool any = false;
    for (const SenderReport& s : senders) {
      for (const auto& [id, seconds] : s.client_seconds) {
        speeds_.Observe(id, seconds);
        any = true;
      }
    }
    return any ? store_->PutMeta("client_speeds", speeds_.ToJson()) : absl::OkStatus();
  }

  // The global tier: the regions' aggregators send to it. With hide_region_sums its SecAgg hub
  // runs the regions' round, in which the aggregators are the clients.
  absl::Status StartServer() {
    if (fed().reproducible() && global_.size() >= RoundCoordinatorOptions{}.file_staging_from) {
      return absl::InvalidArgumentError(absl::StrCat(
          "federation.reproducible keeps every update of a round in memory until it closes, and "
          "this model's ", global_.size(), " parameters are staged in files instead; set "
          "federation.reproducible: false"));
    }
    TierOptions o;
    o.listen = options_.listen;
    o.coordinator.experiment_id = experiment_id_;
    o.coordinator.model_size = global_.size();
    o.coordinator.staging_dir = fed_dir_;  // a large model's region update is staged there
    o.coordinator.ordered = fed().reproducible();
    o.coordinator.min_updates = std::max(1, fed().min_clients());
    o.coordinator.deadline_seconds = fed().round_deadline_seconds();
    if (buffered()) {
      o.coordinator.min_updates = fed().buffer_size();
      o.coordinator.deadline_seconds = 0;
      o.coordinator.buffer = StalenessPolicy();
      // Reproducible: a region's second push waits for the next step, whatever its timing.
      o.coordinator.buffer.distinct_senders = fed().reproducible();
    }
    // Only a region's own aggregator speaks for it, for at most its clients.
    for (const auto& r : fed().regions()) o.policy.region_clients[r.name()] = r.clients();
    o.policy.max_client_weight = MaxClientWeight();
    o.secure = fed().hide_region_sums();
    o.secagg.stage_timeout_seconds = StageTimeout();
    o.secagg.quantization = Quantization();
    o.secagg.staging_dir = fed_dir_;  // the regions' masked sums are assembled there
    // The session's TLS/mTLS and token rules, as for the worker service (search/search_run.cc).
    ServerSecurity& security = session_.security();
    if (!hand_joined_.empty()) {
      // Aggregators started by hand ask for their plans, each by its own region's certificate.
      // What participants need of the experiment, signed by this orchestrator: its trial's
      // environment (which may hold secrets), the search, budget and resources stay here, and
      // a client command runs in its host's own folder.
      v1::ExperimentSpec shared = spec_;
      shared.clear_source_path();
      shared.mutable_trial()->mutable_env()->clear();
      shared.clear_search();
      shared.clear_budget();
      shared.clear_resources();
      const std::string bytes = shared.SerializeAsString();
      // Signed anew by every session of the run, each plan valid for kPlanLifetime.
      const int64_t expires_at = absl::ToUnixSeconds(env_.clock->Now() + kPlanLifetime);
      absl::StatusOr<KeyAttestation> signature = SignAsOrchestrator(
          session_.tls_dir(), ExperimentBinding(experiment_id_, bytes, expires_at));
      if (!signature.ok()) return signature.status();
      std::map<std::string, v1::JoinPlan> plans;
      for (const auto& r : fed().regions()) {
        if (!HandJoined(r.name())) continue;  // the run starts this region's participants
        v1::JoinPlan& plan = plans[r.name()];
        for (const std::string& f : AggregatorFlags(r)) plan.add_flags(f);
        plan.set_spec(bytes);
        plan.set_spec_signature(signature->signature);
        plan.set_spec_certificate(signature->certificate_pem);
        plan.set_expires_at(expires_at);
      }
      o.join = [this, plans = std::move(plans)](
                   const PeerIdentity& caller,
                   const std::string& pool) -> absl::StatusOr<v1::JoinPlan> {
        auto it = plans.find(caller.region);
        if (caller.role != Role::kAggregator || it == plans.end()) {
          return absl::PermissionDeniedError(
              absl::StrCat(IdentityUri(caller),
                           " may not join here: only an aggregator "
                           "certificate of one of the run's regions started by hand"));
        }
        if (!pool.empty()) {
          SEXTANT_RETURN_IF_ERROR(
              QueueHandJoin(absl::StrCat("aggregator ", caller.region), caller.region, true, pool));
        }
        return it->second;
      };
      // A client started by hand that named its pool, as its region's aggregator reports it.
      o.join_report = [this](const PeerIdentity& caller, const std::string& client_id,
                             const std::string& pool) -> absl::Status {
        const std::string region = client_id.substr(0, client_id.find('/'));
        int index = -1;
        const v1::FederatedRegion* r = Region(region);
        if (caller.role != Role::kAggregator || caller.region != region || r == nullptr ||
            !absl::SimpleAtoi(client_id.substr(client_id.find('/') + 1), &index) || index < 0 ||
            index >= r->clients()) {
          return absl::PermissionDeniedError(
              absl::StrCat(IdentityUri(caller), " may not report client ", client_id,
                           ": only the aggregator of its region, for one of its places"));
        }
        return QueueHandJoin(absl::StrCat("client ", client_id), region, false, pool);
      };
    }
    if (!AllHandJoined() && !session_.tls_dir().empty()) {
      if (absl::Status s = IssueParticipantCertificates(&security); !s.ok()) {
        return absl::InvalidArgumentError(s.message());
      }
    }
    o.credentials = MakeServerCredentials(security);
    SEXTANT_ASSIGN_OR_RETURN(tier_, Tier::Start(std::move(o), env_.clock));
    return absl::OkStatus();
  }

  // The federation's region `name`, or null.
  const v1::FederatedRegion* Region(const std::string& name) const {
    for (const v1::FederatedRegion& r : fed().regions()) {
      if (r.name() == name) return &r;
    }
    return nullptr;
  }

  // A participant started by hand named `pool` (`who`: "aggregator R", "client R/I"): checked
  // here against the run's pools (any thread: the spec does not change), and billed on the
  // run's loop from then on (BillHandJoins). InvalidArgument naming what is wrong.
  absl::Status QueueHandJoin(std::string who, const std::string& region, bool aggregator,
                             const std::string& pool) ABSL_LOCKS_EXCLUDED(hand_mu_) {
    std::vector<std::string> names;
    for (const v1::Pool& p : spec_.resources().pools()) {
      names.push_back(p.name());
      if (p.name() != pool) continue;
      if (p.region() != region) {
        return absl::InvalidArgumentError(
            absl::StrCat("pool ", pool, " is in region ", p.region(), ", not ", region,
                         ": a participant is billed on a pool of its own region"));
      }
      if (!PoolHosts(p, aggregator)) {
        return absl::InvalidArgumentError(absl::StrCat("pool ", pool, " hosts ", p.hosts(),
                                                       " only, not ", aggregator ? "an aggregator" : "clients"));
      }
      absl::MutexLock lock(&hand_mu_);
      hand_joins_.push_back({std::move(who), pool});
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "no pool ", pool, " in the run's resources.pools (",
        names.empty() ? "it has none: the run bills nothing" : absl::StrJoin(names, ", "), ")"));
  }

  // Starts the bill of each participant started by hand that joined on a pool since the last
  // call (once per participant: one that joins again keeps its bill), with an event each. Its
  // bill runs to the end of the run, as a static pool's workers' do.
  void BillHandJoins() ABSL_LOCKS_EXCLUDED(hand_mu_) {
    std::vector<std::pair<std::string, std::string>> joins;
    {
      absl::MutexLock lock(&hand_mu_);
      joins.swap(hand_joins_);
    }
    if (!billing_) return;
    for (const auto& [who, pool] : joins) {
      if (!billed_by_hand_.emplace(who, pool).second) continue;
      const PoolOffer* offer = billing_->placement().Pool(pool);
      if (offer == nullptr) continue;  // checked when it joined
      billing_->StartOn(*offer);
      ++hand_launched_[pool];
      (void)store_->AddEvent(EventTime(), "federation_joined", 0,
                             absl::StrCat(who, " joined on pool ", pool,
                                          ": billed from now to the end of the run"));
    }
  }

  bool hide_region_sums() const { return fed().hide_region_sums(); }
  bool buffered() const { return fed().mode() == "buffered"; }

  BufferPolicy StalenessPolicy() const {
    BufferPolicy b;
    b.enabled = true;
    b.max_staleness = fed().max_staleness();
    if (fed().staleness_weighting() == "constant") b.weighting = BufferPolicy::Weighting::kConstant;
    return b;
  }

  // Buffered: the updates a region buffers before it pushes them, ceil(buffer_size / regions)
  // and at most its clients (each client delivers once per buffer).
  int64_t RegionBufferSize(int64_t clients) const {
    const int64_t regions = std::max(1, fed().regions_size());
    return std::clamp<int64_t>((fed().buffer_size() + regions - 1) / regions, 1,
                               std::max<int64_t>(1, clients));
  }

  std::string Bin() const { return session_.worker_binary(); }

  // Where a participant's own certificate goes: its region's aggregator (index -1) or client.
  std::string ParticipantTlsDir(const std::string& region, int index) const {
    return index < 0 ? absl::StrCat(fed_dir_, "/tls/", region, "/aggregator")
                     : absl::StrCat(fed_dir_, "/tls/", region, "/client-", index);
  }

  // Every participant this run starts gets a certificate of its own identity
  // (sextant://aggregator/R/aggregator, sextant://client/R/I) from the CA in --tls-dir, so that
  // each may speak only as itself. The aggregators' certificates are enrolled here: only they
  // call this server.
  absl::Status IssueParticipantCertificates(ServerSecurity* security) {
    for (const auto& r : fed().regions()) {
      if (HandJoined(r.name())) continue;
      SEXTANT_ASSIGN_OR_RETURN(
          std::string fingerprint,
          IssueParticipantDirectory(session_.tls_dir(), ParticipantTlsDir(r.name(), -1),
                                    PeerIdentity{Role::kAggregator, r.name(), "aggregator"}));
      security->enrolled.insert(fingerprint);
      std::vector<std::string> clients;
      for (int i = 0; i < r.clients(); ++i) {
        SEXTANT_ASSIGN_OR_RETURN(
            clients.emplace_back(),
            IssueParticipantDirectory(session_.tls_dir(), ParticipantTlsDir(r.name(), i),
                                      PeerIdentity{Role::kClient, r.name(), absl::StrCat(i)}));
      }
      // The region's aggregator admits the certificates the orchestrator does, and its clients.
      SEXTANT_RETURN_IF_ERROR(
          EnrollParticipants(session_.tls_dir(), ParticipantTlsDir(r.name(), -1), clients));
    }
    return absl::OkStatus();
  }

  // A participant dials and serves with its own certificate (IssueParticipantCertificates),
  // or on loopback with the run's secret.
  void AddCredentials(std::vector<std::string>* argv, const std::string& region, int index) const {
    if (session_.tls_dir().empty()) {
      argv->insert(argv->end(), {"--secret-file", session_.secrets().worker_file});
      return;
    }
    argv->insert(argv->end(), {"--tls-dir", ParticipantTlsDir(region, index), "--tls-name",
                               index < 0 ? "aggregator" : absl::StrCat(index)});
    // A client dials its aggregator on loopback, a name no aggregator certificate carries (it
    // could then pose as the orchestrator): it admits the one identity the run issued instead.
    if (index >= 0) {
      argv->insert(argv->end(),
                   {"--server-identity",
                    IdentityUri(PeerIdentity{Role::kAggregator, region, "aggregator"})});
    }
  }

  // The most weight one client may declare, at both tiers and in secure rounds: its example
  // share (examples_per_client, 60,000 when unset; a command client's declared cap), 1 under DP.
  double MaxClientWeight() const { return static_cast<double>(Quantization().max_weight); }

  // The model lives in the evaluator process (the only one here that runs the trainer): it
  // gives the seeded starting weights and scores the global model after each evaluated round.
  absl::Status StartEvaluator() {
    std::filesystem::create_directories(run_dir_->logs_dir());
    auto evaluator = GlobalEvaluator::Start(
        env_.launcher,
        {Bin(), "--role", "evaluator", "--spec", spec_file_, "--work-dir", fed_dir_ + "/eval",
         "--threads", "2", "--exit-with-parent"},
        fed_dir_ + "/eval", run_dir_->logs_dir() + "/evaluator.log", kEvaluatorStartup, env_.clock);
    if (!evaluator.ok()) return evaluator.status();
    evaluator_ = *std::move(evaluator);
    return absl::OkStatus();
  }

  // The global model's score after `round`; last_eval_ on success. Without the built-in model
  // there is no evaluator (a no-op): CompleteRound takes the clients' own scores instead.
  absl::Status Evaluate(int64_t round) {
    if (!evaluator_) return absl::OkStatus();
    absl::StatusOr<ModelScore> score = evaluator_->Evaluate(round, global_, kEvaluationTimeout);
    if (!score.ok()) return score.status();
    last_eval_ = *score;
    return absl::OkStatus();
  }

  // The quantisation of secure aggregation. Weights are example counts (at most a client's
  // share: examples_per_client, or the whole training split), or 1 under DP. Each coordinate of
  // an update is clipped to [-4, 4], or to C plus six standard deviations of distributed noise
  // under DP, at 16 bits: the decoded mean is within 4 / 32767 of the plaintext one.
  SecAggQuantization Quantization() const {
    SecAggQuantization q;
    q.bits = 16;
    q.clip = 4.0;
    q.max_weight = SecAggMaxWeight(fed());
    if (fed().has_dp()) {
      q.clip = std::max(q.clip, DpClipNorm(fed()) + 6 * MaxClientNoiseStddev(fed()));
    }
    return q;
  }

  // The quantisation of the next secure round. int8 updates go at 8 bits: under DP in the clip
  // that covers C and the noise; otherwise each tensor in its own range, sized from the last
  // round's mean update (SegmentClipsFromMean, with kInt8RangeHeadroom), so that the step
  // follows the updates as they shrink. The first round (and the first after a resume) has no
  // mean to size ranges from and goes at 16 bits.
  SecAggQuantization RoundQuantization() const {
    SecAggQuantization q = Quantization();
    if (fed().update_compression() != "int8") return q;
    if (fed().has_dp()) {
      q.bits = 8;
    } else if (!int8_ranges_.empty()) {
      q.bits = 8;
      q.segments = LayoutSegments(layout_);
      q.segment_clips = int8_ranges_;
    }
    return q;
  }

  // Seconds since the run started: round rows, the wall-time budget, messages.
  double Seconds() const { return absl::ToDoubleSeconds(env_.clock->Now() - start_); }
  // An event's time: unix seconds, as every other writer of the events table records it and
  // as `sextant events`, `status` and the report read it.
  double EventTime() const { return absl::ToUnixMicros(env_.clock->Now()) / 1e6; }

  // Each secure-aggregation stage after the first closes this long after it opened.
  double StageTimeout() const {
    return fed().round_deadline_seconds() > 0 ? fed().round_deadline_seconds() : 30.0;
  }

  // The ring of every secure sum when the regions' sums are hidden: it holds all clients' total.
  int RegionsRingBits() const {
    const SecAggQuantization q = RoundQuantization();
    return SecureQuantizer::RequiredRingBits(q.bits, TotalClients(fed()), q.max_weight);
  }

  // The experiment's settings for region r's aggregator, as its flags: what the run gives the
  // aggregators it starts and the plan one started by hand joins with.
  std::vector<std::string> AggregatorFlags(const v1::FederatedRegion& r) const {
    std::vector<std::string> argv = {"--region",
                                     r.name(),
                                     "--experiment-id",
                                     experiment_id_,
                                     "--model-size",
                                     absl::StrCat(global_.size()),
                                     "--clients",
                                     absl::StrCat(r.clients()),
                                     "--max-client-weight",
                                     absl::StrCat(MaxClientWeight())};
    // Robust rules run where client updates are in the clear: at the regional aggregators.
    if (!fed().aggregation().empty() && fed().aggregation() != "fedavg") {
      argv.insert(argv.end(), {"--aggregation", fed().aggregation(), "--trim-fraction",
                               absl::StrCat(fed().trim_fraction()), "--byzantine",
                               absl::StrCat(fed().byzantine_clients()), "--krum-selected",
                               absl::StrCat(fed().krum_selected())});
    }
    if (fed().secure_aggregation()) {
      const SecAggQuantization q = Quantization();
      argv.insert(argv.end(), {"--secure-aggregation", "1", "--secagg-clip", absl::StrCat(q.clip),
                               "--secagg-bits", absl::StrCat(q.bits), "--secagg-max-weight",
                               absl::StrCat(q.max_weight), "--secagg-stage-timeout",
                               absl::StrCat(StageTimeout())});
      if (fed().hide_region_sums()) {
        argv.insert(argv.end(), {"--hide-region-sum", "1", "--secagg-ring-clients",
                                 absl::StrCat(TotalClients(fed()))});
      }
    }
    // Central DP over plaintext updates: the aggregator enforces each client's bound itself.
    if (DpClipNorm(fed()) > 0 && !fed().secure_aggregation()) {
      argv.insert(argv.end(), {"--dp-clip-norm", absl::StrCat(DpClipNorm(fed()))});
    }
    if (fed().reproducible()) argv.insert(argv.end(), {"--reproducible", "1"});
    if (buffered()) {
      argv.insert(argv.end(), {"--max-staleness", absl::StrCat(fed().max_staleness()),
                               "--staleness-weighting", fed().staleness_weighting()});
    }
    return argv;
  }

  // Starts billing, then, in each region not started by hand, its aggregator, then its
  // clients once it serves (it writes its port to a file).
  absl::Status LaunchParticipants() {
    SEXTANT_RETURN_IF_ERROR(StartBilling());
    std::filesystem::create_directories(run_dir_->logs_dir());
    const std::string target = absl::StrCat("127.0.0.1:", tier_->port());
    for (const auto& r : fed().regions()) {
      if (HandJoined(r.name())) continue;
      // Each region's files sit in regions/: no region name can meet the run's own folders.
      std::filesystem::create_directories(fed_dir_ + "/regions");
      const std::string port_file = absl::StrCat(fed_dir_, "/regions/", r.name(), ".port");
      std::filesystem::remove(port_file);
      std::vector<std::string> argv = {Bin(),
                                       "--role",
                                       "aggregator",
                                       "--connect",
                                       target,
                                       "--work-dir",
                                       absl::StrCat(fed_dir_, "/regions/", r.name()),
                                       "--port-file",
                                       port_file,
                                       "--startup-wait",
                                       absl::StrCat(kStartupWaitSeconds),
                                       "--exit-with-parent"};
      AddCredentials(&argv, r.name(), -1);
      const std::vector<std::string> flags = AggregatorFlags(r);
      argv.insert(argv.end(), flags.begin(), flags.end());
      participants_->Launch(argv, absl::StrCat("aggregator-", r.name(), ".log"),
                            absl::StrCat("aggregator ", r.name()), r.name(), /*aggregator=*/true);
    }
    int global_index = 0;  // the clients' order of federation.client_data_dirs
    for (const auto& r : fed().regions()) {
      if (HandJoined(r.name())) {
        global_index += r.clients();
        continue;
      }
      const std::string port_file = absl::StrCat(fed_dir_, "/regions/", r.name(), ".port");
      const absl::Time until = env_.clock->Now() + absl::Seconds(60);
      int port = 0;
      while (env_.clock->Now() < until && port == 0) {
        std::ifstream in(port_file);
        if (!(in >> port)) port = 0;
        if (port == 0) env_.clock->SleepFor(absl::Milliseconds(50));
      }
      participants_->SetRegionPort(r.name(), port);
      if (port == 0) {
        return absl::UnavailableError(absl::StrCat("the aggregator of region ", r.name(),
                                                   " did not start; see ", run_dir_->logs_dir(),
                                                   "/aggregator-", r.name(), ".log"));
      }
      for (int i = 0; i < r.clients(); ++i) {
        std::vector<std::string> argv = {Bin(),
                                         "--role",
                                         "client",
                                         "--region",
                                         r.name(),
                                         "--index",
                                         absl::StrCat(i),
                                         "--connect",
                                         absl::StrCat("127.0.0.1:", port),
                                         "--experiment-id",
                                         experiment_id_,
                                         "--spec",
                                         spec_file_,
                                         "--threads",
                                         "1",
                                         "--work-dir",
                                         absl::StrCat(fed_dir_, "/client-", r.name(), "-", i),
                                         "--exit-with-parent"};
        AddCredentials(&argv, r.name(), i);
        if (global_index < fed().client_data_dirs_size()) {
          argv.insert(argv.end(), {"--data-dir", fed().client_data_dirs(global_index)});
        }
        ++global_index;
        participants_->Launch(argv, absl::StrCat("client-", r.name(), "-", i, ".log"),
                              absl::StrCat("client ", ClientId(r.name(), i)), r.name(),
                              /*aggregator=*/false);
      }
    }
    return absl::OkStatus();
  }

  // Opens the regions' round `round` (every region takes part, with zeros when none of its
  // clients was sampled), before the round is published so that no region finds it closed.
  absl::Status OpenRegionsRound(int64_t round) {
    tier_->secagg().SetQuantization(RoundQuantization());
    std::vector<std::string> regions;
    for (const auto& r : fed().regions()) regions.push_back(r.name());
    SEXTANT_ASSIGN_OR_RETURN(
        SecAggConfig config,
        RegionalLayerConfig(experiment_id_, round, static_cast<int32_t>(regions.size()),
                            RegionsRingBits(), global_.size() + 1,
                            fed().seed() * 0x2545F4914F6CDD1DULL + static_cast<uint64_t>(round)));
    return tier_->secagg().OpenWithConfig(std::move(regions), std::move(config), 0, 1);
  }

  // The regions' round's outcome as a round outcome: the decoded mean of every client's update
  // (the orchestrator never sees a region's own sum). Aborted when the round aborted.
  absl::StatusOr<RoundOutcome> CloseRegionsRound(int64_t round, LazyFloats* mean) {
    SEXTANT_ASSIGN_OR_RETURN(SecAggRoundOutcome out, tier_->secagg().TakeOutcome());
    SEXTANT_ASSIGN_OR_RETURN(
        SecureQuantizer quantizer,
        MakeQuantizer(out.quantization, TotalClients(fed()), out.config.ring_bits));
    // Resident only as the decode writes it, while the sum's memory goes back.
    *mean = LazyFloats(global_.size());
    if (mean->size() != global_.size()) {
      return absl::ResourceExhaustedError("no memory for the regions' mean");
    }
    SEXTANT_ASSIGN_OR_RETURN(int64_t weight,
                             quantizer.ConsumeMean(std::move(out.sum), mean->span()));
    RoundOutcome r;
    r.round = round;
    r.mean = mean->span();
    r.total_weight = static_cast<double>(weight);
    r.count = out.count;
    r.senders = static_cast<int64_t>(out.contributors.size());
    // The regions' rejections of their clients, plus the regions' messages turned away here.
    const int64_t here = tier_->secagg().rejections();
    r.rejected = out.rejected + (here - region_rejections_);
    region_rejections_ = here;
    r.metrics = out.metrics;
    return r;
  }

  absl::Status PublishRound(int64_t round) {
    if (hide_region_sums()) SEXTANT_RETURN_IF_ERROR(OpenRegionsRound(round));
    const std::string file = absl::StrCat(fed_dir_, "/global-", round, ".f32");
    {
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(global_.data()), global_.size() * sizeof(float));
      if (!out) return absl::InternalError(absl::StrCat("cannot write ", file));
    }
    ReleaseGlobal();
    std::map<std::string, RoundTask> tasks;
    const SecAggQuantization quantization = RoundQuantization();
    auto task_of = [&](const std::string& region) -> RoundTask& {
      RoundTask& t = tasks[region];
      t.model_size = static_cast<int64_t>(global_.size());
      t.seed = fed().seed() * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(round);
      t.deadline_seconds = fed().round_deadline_seconds();
      if (fed().secure_aggregation()) {
        t.quantizer_bits = quantization.bits;
        t.segments = quantization.segments;
        t.segment_clips = quantization.segment_clips;
      } else if (fed().update_compression() == "int8") {
        t.segments = LayoutSegments(layout_);  // the aggregators hold int8 updates to them
      }
      return t;
    };
    // Every region takes part in the regions' round, those without a sampled client too.
    if (hide_region_sums()) {
      for (const auto& r : fed().regions()) task_of(r.name());
    }
    const std::vector<Participant> chosen = SelectClients(fed(), round, speeds_);
    for (const Participant& p : chosen) {
      task_of(p.region).participants.push_back(ClientId(p.region, p.index));
    }
    if (!buffered()) SEXTANT_RETURN_IF_ERROR(RecordSelection(round, chosen));
    // Each region may close at the deadline once it is short by no more than the round's slack
    // (sampled - min_clients): with one region that is min_clients itself, and the global tier
    // still waits until min_clients are in over all regions.
    int64_t sampled = 0;
    for (const auto& [region, t] : tasks) sampled += static_cast<int64_t>(t.participants.size());
    const int64_t slack = std::max<int64_t>(0, sampled - std::max(1, fed().min_clients()));
    for (auto& [region, t] : tasks) {
      t.min_updates = std::max<int64_t>(1, static_cast<int64_t>(t.participants.size()) - slack);
      // Buffered: each region pushes its share of a server step's buffer_size updates.
      if (buffered()) t.min_updates = RegionBufferSize(static_cast<int64_t>(t.participants.size()));
    }
    SEXTANT_RETURN_IF_ERROR(tier_->hub().Publish(
        round, file, std::move(tasks), buffered() ? 0 : fed().round_deadline_seconds(),
        buffered() ? fed().buffer_size() : std::max(1, fed().min_clients())));
    if (!previous_file_.empty()) std::filesystem::remove(previous_file_);
    previous_file_ = file;
    published_round_ = round;
    return absl::OkStatus();
  }

  // Finishes one closed round: server step, evaluation, checkpoint, rows. OK, or the first
  // step's error (the run ends with it).
  absl::Status CompleteRound(int64_t round, const RoundOutcome& outcome,
                             const std::vector<SenderReport>& senders) {
    if (fed().secure_aggregation() && fed().update_compression() == "int8" && !fed().has_dp()) {
      int8_ranges_ = SegmentClipsFromMean(outcome.mean, LayoutSegments(layout_), kInt8RangeHeadroom,
                                          kInt8MinRange);
    }
    // A copy of the mean only to add central noise to; otherwise the step reads it in place.
    std::vector<float> noisy;
    if (CentralNoise()) {
      noisy.assign(outcome.mean.begin(), outcome.mean.end());
      SEXTANT_RETURN_IF_ERROR(
          privacy_->AddCentralNoise(absl::MakeSpan(noisy), outcome.total_weight));
    }
    // A file-backed model is stepped a range at a time, each range's pages given back at once.
    SEXTANT_RETURN_IF_ERROR(optimizer_->Step(global_, CentralNoise() ? noisy : outcome.mean,
                                             kStepRangeFloats, [&](size_t at, size_t n) {
                                               if (global_file_) global_file_->Release(at, n);
                                             }));
    // The round's mean is spent: a large model's evaluation, checkpoint and files then read the
    // model without the mean beside it in memory.
    if (global_file_ && !buffered() && !hide_region_sums()) tier_->hub().ReleaseOutcome();
    std::optional<double> epsilon;
    if (privacy_) epsilon = privacy_->ComposeThrough(round);
    std::vector<RoundRow> rows;
    const bool eval =
        round == fed().rounds() || fed().eval_every() <= 1 || round % fed().eval_every() == 0;
    if (!evaluator_) {
      // The clients' evaluations of the global model they received, weighted by their examples.
      last_eval_ = ModelScore{outcome.metrics.eval_loss, outcome.metrics.eval_accuracy,
                              static_cast<int64_t>(outcome.metrics.eval_weight)};
      if (eval && !fed().evaluate_command().empty()) RunEvaluateCommandOn(round);
    } else if (eval) {
      SEXTANT_RETURN_IF_ERROR(Evaluate(round));
    }
    // Rejections: regional updates turned away here plus client updates each region rejected.
    int64_t rejected = outcome.rejected;
    for (const SenderReport& s : senders) rejected += s.rejected;
    rows.push_back({round, "", last_eval_.accuracy, last_eval_.loss, outcome.count, rejected,
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
                        last_eval_.accuracy, last_eval_.loss, outcome.count, rejected);
    if (epsilon) absl::StrAppendFormat(&line, " epsilon=%.4f", *epsilon);
    if (failures_this_round_ > 0) absl::StrAppend(&line, " failed=", failures_this_round_);
    if (options_.federated_trial) {
      // The trial's metrics at this fidelity (search.fidelity.name: rounds), for its worker.
      absl::StrAppendFormat(&line, " rounds=%d val_accuracy=%.17g val_loss=%.17g", round,
                            last_eval_.accuracy, last_eval_.loss);
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
              << global_.size() << " parameters, ";
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
      if (!hand_joined_.empty()) AnnounceJoin();
      SEXTANT_RETURN_IF_ERROR(AwaitRegions());
      if (billing_) billing_->RoundsBegin();
    }
    for (int64_t round = last_round_ + 1; round <= fed().rounds(); ++round) {
      // A stop takes effect at the round boundary too, not only while a round waits.
      if (absl::Status stop = Interruption(); !stop.ok()) return StoppedBy(stop);
      if (absl::Status s = CheckPrivacyBudget(); !s.ok()) return EpsilonReached(s);
      if (absl::Status s = CheckCostBudget(round); !s.ok()) return StoppedBy(s);
      if (round != published_round_) {
        SEXTANT_RETURN_IF_ERROR(PublishRound(round));
      }
      absl::Status ready =
          tier_->AwaitClosable(hide_region_sums() ? Tier::Close::kSecure : Tier::Close::kPlain,
                               [&] { return Interruption(); });
      if (!ready.ok()) return StoppedBy(ready);
      ShowFailures();
      std::vector<SenderReport> senders;
      std::vector<float> regions_mean;
      LazyFloats secure_mean;
      auto outcome = hide_region_sums() ? CloseRegionsRound(round, &secure_mean)
                                        : tier_->hub().Close(&senders);
      // A synchronous round whose participants failed: no update, or too few to count.
      if (!hide_region_sums() && !buffered() &&
          (!outcome.ok() || outcome->count < std::max(1, fed().min_clients()))) {
        SEXTANT_RETURN_IF_ERROR(RoundFailed(round, outcome.ok() ? outcome->count : 0));
        continue;
      }
      if (!outcome.ok()) {
        return (hide_region_sums()
                    ? absl::AbortedError(absl::StrCat("the regions' secure round ", round,
                                                      " failed: ", outcome.status().message()))
                    : outcome.status());
      }
      SEXTANT_RETURN_IF_ERROR(ObserveSpeeds(senders));
      if (buffered()) {
        // Copied out, so that the next buffer fills while this one is applied and evaluated.
        regions_mean.assign(outcome->mean.begin(), outcome->mean.end());
        outcome->mean = regions_mean;
        tier_->hub().ResumeBuffering();
      }
      if (billing_) billing_->MeterTransfer(tier_->transfer().Totals());
      SEXTANT_RETURN_IF_ERROR(CompleteRound(round, *outcome, senders));
      SEXTANT_RETURN_IF_ERROR(CloseRoundBill(round));
      failed_in_a_row_ = 0;
      failures_this_round_ = 0;
      regions_failed_this_round_ = 0;
      last_failure_.clear();
      if (round == options_.pause_after_round && round < fed().rounds()) return PausedAtRung();
    }
    return Finish();
  }

  // With resources.pools (and participants this run starts), bills them: FederatedBilling over
  // the placement of the experiment's catalog, after the costs of earlier sessions.
  absl::Status StartBilling() {
    if (spec_.resources().pools_size() == 0) return absl::OkStatus();
    std::vector<CatalogError> errors;
    SEXTANT_ASSIGN_OR_RETURN(Catalog catalog, LoadCatalog(spec_.resources().catalog(), &errors));
    SEXTANT_ASSIGN_OR_RETURN(FederatedPlacement placement,
                             FederatedPlacement::Create(spec_, catalog));
    SEXTANT_ASSIGN_OR_RETURN(std::vector<CostRow> prior, store_->LoadCosts());
    SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> fleet, store_->GetMeta("fleet"));
    if (fleet) prior_pools_ = PoolsFromFleetMeta(*fleet);
    billing_.emplace(placement, env_.clock, start_, std::move(prior));
    // Participants started by hand are billed as they join (BillHandJoins), not here.
    if (!AllHandJoined()) {
      participants_->SetMarket(std::move(placement), &*billing_,
                               SpotMarketSeed(fed(), last_round_));
    }
    return absl::OkStatus();
  }

  // Rewrites the store's cost rows from the billing, in one transaction.
  absl::Status WriteCosts() {
    SEXTANT_RETURN_IF_ERROR(store_->Begin());
    absl::Status s = store_->PutMeta("fleet", FleetMetaJson());
    if (s.ok()) s = store_->ClearCosts();
    for (const CostRow& row : billing_->Rows()) {
      if (s.ok()) s = store_->AddCost(row);
    }
    if (!s.ok()) {
      store_->Rollback();
      return s;
    }
    return store_->Commit();
  }

  // Meta "fleet" as a search's fleet writes it (results' preemptions by pool): each pool's
  // region, market, participants launched and instances the market took back, earlier
  // sessions' counts included.
  std::string FleetMetaJson() const {
    FleetMeta meta{spec_.resources().provider(), billing_->Committed(), 0, {}};
    for (const v1::Pool& p : spec_.resources().pools()) {
      FleetPoolStats& st = meta.pools[p.name()];
      st = {p.name(), p.region(), MarketName(PoolMarket(p.market()))};
      if (auto prior = prior_pools_.find(p.name()); prior != prior_pools_.end()) {
        st.launched = prior->second.launched;
        st.preemptions = prior->second.preemptions;
      }
      st.launched += Count(participants_->launched(), p.name()) + Count(hand_launched_, p.name());
      st.preemptions += Count(participants_->preemptions(), p.name());
      st.interruptions = st.preemptions;  // each one took a participant with it
    }
    return FleetMetaToJson(meta);
  }
  static int Count(const std::map<std::string, int>& m, const std::string& key) {
    auto it = m.find(key);
    return it == m.end() ? 0 : it->second;
  }

  // The round's bill is closed: its dollars as an event, and the cost rows stored.
  absl::Status CloseRoundBill(int64_t round) {
    if (!billing_) return absl::OkStatus();
    const double cost = billing_->CloseRound();
    // projected: what the budget check expected the round to add ("-" for a session's first).
    SEXTANT_RETURN_IF_ERROR(store_->AddEvent(
        EventTime(), "round_cost", 0,
        absl::StrFormat("round=%d cost=%.6f projected=%s total=%.6f transfer=%.6f", round, cost,
                        projected_ ? absl::StrFormat("%.6f", *projected_) : "-",
                        billing_->Committed(), billing_->transfer())));
    return WriteCosts();
  }

  // budget.max_cost: ResourceExhausted (the run stops at this round boundary, keeping the last
  // global model) when the committed dollars and the round's projection would pass the cap.
  absl::Status CheckCostBudget(int64_t round) {
    if (!billing_) return absl::OkStatus();
    const double projected = billing_->NextRoundProjection();
    projected_.reset();
    if (billing_->projects()) projected_ = projected;
    if (!spec_.budget().has_max_cost()) return absl::OkStatus();
    const double committed = billing_->Committed();
    // The round must fit, and so must stopping after it: its participants are billed until
    // they have exited.
    const double with_wind_down = billing_->NextRoundProjection(kParticipantWindDown);
    if (committed + with_wind_down <= spec_.budget().max_cost()) return absl::OkStatus();
    const std::string why = absl::StrFormat(
        "budget: round %d would pass max_cost %.6g (spent %.6f, a round costs up to %.6f and "
        "stopping after it %.6f more); the model is round %d's",
        round, spec_.budget().max_cost(), committed, projected, with_wind_down - projected,
        last_round_);
    *env_.out << "sextant: " << why << "\n";
    (void)store_->AddEvent(EventTime(), "budget_exhausted", 0, why);
    return absl::ResourceExhaustedError("BUDGET_EXHAUSTED");
  }

  // A synchronous plaintext round closes without the regions whose aggregate did not come (an
  // aggregator preempted or failed, its replacement not yet in): each sits the round out, and the
  // rounds table says so with a row of no clients and no scores (results: "sat_out"), an event
  // and a console line. Under hide_region_sums the regions' round has no per-region rows.
  void RecordRegionsSittingOut(int64_t round, std::vector<RoundRow>& rows) {
    if (buffered() || hide_region_sums()) return;
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

  // federation.max_failed_rounds as it holds (default 3).
  int MaxFailedRounds() const {
    return fed().max_failed_rounds() > 0 ? fed().max_failed_rounds() : 3;
  }

  // Says each failure the participants reported since the last call: a line on the console
  // and an event, with the cause (a client command's exit and stderr tail).
  void ShowFailures() {
    for (const FailureReport& f : tier_->hub().TakeFailures()) {
      const bool region = f.failed == f.reporter;
      const std::string why = ErrorLine(f.error);
      (void)store_->AddEvent(EventTime(), region ? "region_failed" : "client_failed", 0,
                             absl::StrCat("round ", f.round, ": ", f.failed, ": ", f.error));
      *env_.out << "sextant: round " << f.round << ": " << (region ? "region " : "client ")
                << f.failed << " failed: " << why << "\n"
                << std::flush;
      ++(region ? regions_failed_this_round_ : failures_this_round_);
      if (!region || last_failure_.empty()) last_failure_ = absl::StrCat(f.failed, ": ", why);
    }
    // A round that waits past its deadline for too few updates says so once.
    const RoundProgress p = tier_->hub().Progress();
    if (p.deadline_passed && p.round > last_round_ && p.round != deadline_said_ &&
        p.count < std::max(1, fed().min_clients()) && fed().round_deadline_seconds() > 0 &&
        !buffered()) {
      deadline_said_ = p.round;
      *env_.out << "sextant: round " << p.round << ": the deadline passed with " << p.count
                << " client updates in, fewer than min_clients " << std::max(1, fed().min_clients())
                << "; waiting for more\n"
                << std::flush;
    }
  }

  // Round `round` closed with `count` client updates, fewer than min_clients: the model stays
  // as it was, and the next round goes on, unless max_failed_rounds rounds in a row failed.
  absl::Status RoundFailed(int64_t round, int64_t count) {
    ShowFailures();
    ++failed_in_a_row_;
    const std::string line =
        absl::StrCat("round ", round, " failed: ", count, " client updates of min_clients ",
                     std::max(1, fed().min_clients()), "; ", failures_this_round_, " clients and ",
                     regions_failed_this_round_, " regions failed",
                     last_failure_.empty() ? "" : absl::StrCat(" (last: ", last_failure_, ")"));
    (void)store_->AddEvent(EventTime(), "round_failed", 0, line);
    *env_.out << "sextant: " << line << "\n" << std::flush;
    failures_this_round_ = 0;
    regions_failed_this_round_ = 0;
    if (failed_in_a_row_ < MaxFailedRounds()) return absl::OkStatus();
    return Failed(absl::StrCat(failed_in_a_row_, " rounds in a row failed (federation.",
                               "max_failed_rounds: ", MaxFailedRounds(), "); the last: ", line,
                               ". Each participant's log is in ", run_dir_->logs_dir()));
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

  // Participants started by hand: says what to start where.
  void AnnounceJoin() {
    *env_.out << "sextant: waiting for the regions' aggregators and clients, started by hand "
                 "with certificates of this CA (sextant certs issue --role aggregator|client "
                 "--region R):\n";
    // The pool each participant is billed on, when the region has one for its role.
    auto pool_flag = [&](const std::string& region, bool aggregator) {
      for (const v1::Pool& p : spec_.resources().pools()) {
        if (p.region() == region && PoolHosts(p, aggregator)) return " --pool " + p.name();
      }
      return std::string();
    };
    for (const auto& r : fed().regions()) {
      if (!HandJoined(r.name())) continue;
      *env_.out << "  region " << r.name() << ": sextant-worker --role aggregator --join --connect "
                << "THIS_HOST:" << tier_->port() << " --tls-dir DIR --tls-name NAME"
                << pool_flag(r.name(), true) << " --listen ADDRESS:PORT --work-dir DIR; then "
                << r.clients()
                << " x sextant-worker --role client --join --connect AGGREGATOR:PORT --tls-dir "
                   "DIR --tls-name NAME"
                << pool_flag(r.name(), false) << " --experiment-id " << experiment_id_ << "\n";
    }
    *env_.out << std::flush;
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
    const absl::Duration wait = !hand_joined_.empty()
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
    BillHandJoins();
    PublishMetrics();  // waits poll this often
    if (tier_) ShowFailures();
    if (Stopping()) return absl::CancelledError("INTERRUPTED");
    if (PastWallBudget() || AtCostBudget()) return absl::ResourceExhaustedError("BUDGET_EXHAUSTED");
    if (!AggregatorsAlive()) return AggregatorExited();
    return absl::OkStatus();
  }

  // The exit code for a wait that Interruption() ended.
  absl::Status StoppedBy(const absl::Status& why) {
    if (absl::IsCancelled(why)) return Interrupted(v1::RUN_INTERRUPTED);
    if (absl::IsResourceExhausted(why)) return Interrupted(v1::RUN_BUDGET_EXHAUSTED);
    return why;
  }

  // True once what the run owes, with its participants' wind-down, reaches budget.max_cost
  // while it waits (start-up, or a round that runs long): the round boundary's check
  // (CheckCostBudget) cannot see those dollars coming. Said once, as an event and a line.
  bool AtCostBudget() {
    if (!billing_ || !spec_.budget().has_max_cost()) return false;
    const double owed = billing_->Committed() + billing_->KeepingCost(kParticipantWindDown);
    if (owed < spec_.budget().max_cost()) return false;
    const std::string why = absl::StrFormat(
        "budget: max_cost %.6g reached while round %d ran (spent %.6f, stopping %.6f more); the "
        "model is round %d's",
        spec_.budget().max_cost(), published_round_, billing_->Committed(),
        owed - billing_->Committed(), last_round_);
    *env_.out << "sextant: " << why << "\n";
    (void)store_->AddEvent(EventTime(), "budget_exhausted", 0, why);
    return true;
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
    if (billing_) {
      m.spend = billing_->Committed();
      m.transfer_spend = billing_->transfer();
      m.participant_preemptions = Preemptions();
    }
    if (spec_.budget().has_max_cost()) m.budget = spec_.budget().max_cost();
    monitor->Publish(m);
  }

  // The participants' instances the market took back, in every session.
  int Preemptions() const {
    int n = 0;
    for (const auto& [pool, k] : participants_->preemptions()) n += k;
    for (const auto& [pool, st] : prior_pools_) n += st.preemptions;
    return n;
  }

  void PutTrial(v1::TrialState state) {
    TrialRow t;
    t.id = 1;
    t.state = state;
    t.params_json = "{}";
    t.attempts = 1;
    t.created_at = absl::ToUnixMicros(start_) / 1e6;
    t.fidelity = static_cast<double>(std::max<int64_t>(last_round_, 0));
    t.preemptions = Preemptions();
    if (state == v1::COMPLETED) {
      const bool loss = spec_.objective().metric().find("loss") != std::string::npos;
      t.value = loss ? last_eval_.loss : last_eval_.accuracy;
    }
    if (state == v1::COMPLETED || state == v1::FAILED) {
      t.finished_at = absl::ToUnixMicros(env_.clock->Now()) / 1e6;
    }
    (void)store_->PutTrial(t);
    trial_ = t;
  }

  // The epsilon target is reached: the run ends normally before the round that would pass it.
  absl::Status EpsilonReached(const absl::Status& why) {
    if (last_round_ >= 1 && last_eval_.examples == 0) {  // resumed: evaluate the model again
      (void)Evaluate(last_round_);
    }
    if (last_round_ >= 1) SEXTANT_RETURN_IF_ERROR(WriteModelFile("final.safetensors"));
    PutTrial(v1::COMPLETED);
    const std::string line = absl::StrCat("stopped after round ", last_round_,
                                          ": the privacy budget is spent (", why.message(), ")");
    SEXTANT_RETURN_IF_ERROR(RecordEnd(v1::RUN_EPSILON_EXHAUSTED, line));
    *env_.out << "sextant: " << spec_.name() << " " << line
              << "; val_accuracy=" << absl::StrFormat("%.4f", last_eval_.accuracy)
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
        spec_.name(), last_round_, last_eval_.accuracy, last_eval_.loss, SpentMetrics());
    return absl::OkStatus();
  }

  absl::Status Finish() {
    // Every round failed: there is no model to report, and no score (never a made-up 0).
    if (last_round_ == 0) {
      return Failed(absl::StrCat(
          "no round completed: every one of the ", fed().rounds(), " rounds failed",
          last_failure_.empty() ? "" : " (last: ", last_failure_, last_failure_.empty() ? "" : ")",
          ". Each participant's log is in ", run_dir_->logs_dir()));
    }
    if (failed_in_a_row_ > 0) {
      *env_.out << "sextant: the last " << failed_in_a_row_ << " rounds failed; the model is round "
                << last_round_ << "'s\n";
    }
    if (last_round_ >= 1 && last_eval_.examples == 0) {  // resumed at the end: evaluate again
      (void)Evaluate(last_round_);
    }
    if (last_round_ >= 1) SEXTANT_RETURN_IF_ERROR(WriteModelFile("final.safetensors"));
    PutTrial(v1::COMPLETED);
    SEXTANT_RETURN_IF_ERROR(RecordEnd(v1::RUN_COMPLETED));
    *env_.out << absl::StrFormat(
        "sextant: %s finished: val_accuracy=%.4f val_loss=%.4f%s after %d rounds\n", spec_.name(),
        last_eval_.accuracy, last_eval_.loss, SpentMetrics(), last_round_);
    return absl::OkStatus();
  }

  // What the run spent, as metrics on its last line, so that a federated search can take them
  // as objectives or constraints: " cost=D" (compute and transfer, when billed) and
  // " epsilon=E" (at the experiment's delta, with DP); empty when neither applies.
  std::string SpentMetrics() const {
    std::string out;
    if (billing_) absl::StrAppend(&out, absl::StrFormat(" cost=%.17g", billing_->Committed()));
    if (privacy_) absl::StrAppend(&out, absl::StrFormat(" epsilon=%.17g", privacy_->epsilon()));
    return out;
  }

  // Ends the experiment for every participant, then stops what is left. The grace covers a
  // loaded machine: DONE reaches a client through its aggregator's next poll, and a client
  // still in a secure-aggregation stage learns it only when that stage's poll returns.
  void Teardown() {
    if (tier_) {
      tier_->hub().SetDone();
      if (hide_region_sums()) tier_->secagg().SetDone();
    }
    participants_->StopAll(absl::Seconds(15));
    // Aggregators started by hand are no children of this run: the server stays up until each
    // has been told the run ended, so that none finds it gone mid-call.
    if (tier_) {
      tier_->Shutdown(!hand_joined_.empty() ? absl::Seconds(15) : absl::ZeroDuration());
    }
  }

  RunSession& session_;
  const RunOptions& options_;
  const RunEnv env_;
  const v1::ExperimentSpec& spec_;
  const std::string run_dir_path_;
  RunDir* const run_dir_;
  Store* const store_;
  std::string fed_dir_, ckpt_dir_, experiment_id_, previous_file_;
  std::unique_ptr<RoundsTable> rounds_;
  ClientSpeeds speeds_;                      // federation.client_selection
  std::map<std::string, int64_t> selected_;  // rounds each client was selected for
  std::string spec_file_;  // the experiment, for the participants and the evaluator
  std::unique_ptr<GlobalEvaluator> evaluator_;
  // The global model (AllocateGlobal): in global_memory_, or from kFileBackedFloats on in
  // global_file_.
  absl::Span<float> global_;
  std::vector<float> global_memory_;
  std::optional<MappedFloats> global_file_;
  TensorFile layout_;  // global_'s named tensors (data empty), for the model files
  // Secure int8 updates: each tensor's range in the next round (RoundQuantization); empty until a
  // round completed in this process.
  std::vector<double> int8_ranges_;
  std::unique_ptr<ServerOptimizer> optimizer_;
  std::optional<PrivacyBudget> privacy_;  // with federation.dp
  std::unique_ptr<Tier> tier_;  // the global tier of the rounds
  // The participants' instances and the regions' transfer, with resources.pools; else null.
  std::optional<FederatedBilling> billing_;
  std::map<std::string, FleetPoolStats> prior_pools_;  // earlier sessions' (meta "fleet")
  std::optional<double> projected_;  // the cost projected for the round in progress
  int64_t region_rejections_ = 0;    // the regions' round's rejections already counted
  int64_t last_round_ = 0;
  int64_t published_round_ = -1;
  int failed_in_a_row_ = 0;          // synchronous rounds that failed since the last completed one
  int64_t failures_this_round_ = 0;  // client failures reported since the last round ended
  int64_t regions_failed_this_round_ = 0;
  std::string last_failure_;    // the last client's (or else region's) failure, one line
  int64_t deadline_said_ = -1;  // the round whose passed deadline was said
  ModelScore last_eval_;
  absl::Time start_;
  std::unique_ptr<Provider> provider_;         // where participants_ run
  std::set<std::string> hand_joined_;          // regions whose participants are started by hand
  // Participants started by hand that joined on a pool: waiting to be billed (from the
  // server's threads), and billed (who -> pool), with how many by pool.
  absl::Mutex hand_mu_;
  std::vector<std::pair<std::string, std::string>> hand_joins_ ABSL_GUARDED_BY(hand_mu_);
  std::map<std::string, std::string> billed_by_hand_;
  std::map<std::string, int> hand_launched_;
  std::optional<Participants> participants_;  // from the constructor on
  TrialRow trial_;                            // the run as trial 1, as last stored
};

}  // namespace

absl::Status RunFederated(RunSession& session) { return FederatedRun(session).Main(); }

}  // namespace sextant
