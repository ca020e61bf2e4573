#include "orchestrator/federated/federated_run.h"

#include <signal.h>
#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
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
#include "aggregator/tier_settings.h"
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
#include "orchestrator/federated/global_checkpoint.h"
#include "orchestrator/federated/global_model.h"
#include "orchestrator/federated/global_score.h"
#include "orchestrator/federated/hand_joins.h"
#include "orchestrator/federated/model_history.h"
#include "orchestrator/federated/participants.h"
#include "orchestrator/federated/privacy_budget.h"
#include "orchestrator/federated/region_launch.h"
#include "orchestrator/federated/round_failures.h"
#include "orchestrator/federated/round_planner.h"
#include "orchestrator/federated/run_bill.h"
#include "orchestrator/federated/run_record.h"
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
// A global model in a mapped file (from kFileBackedFloats values on, global_model.h) takes the
// server step kStepRangeFloats (16 MB) at a time.
constexpr size_t kStepRangeFloats = size_t{1} << 22;

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
        record_(spec_, store_, env_.clock, env_.out, env_.clock->Now()) {
    // Participants run where their pools' providers say (Slurm jobs, processes here, or hosts
    // where they are started by hand); without pools, where resources.provider says. The
    // loader admits local, slurm and static pools only, which are always made.
    const ProviderOptions where{session_.worker_binary(), env_.launcher, options_.slurm_partition,
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
    score_.emplace(
        fed(), GlobalScoreEnv{env_.launcher, env_.clock, store_, env_.err, session_.worker_binary(),
                              spec_file_, fed_dir_, run_dir_->logs_dir(),
                              std::filesystem::path(spec_.source_path()).parent_path().string()});
  }

  absl::Status Main() {
    absl::Status s = Prepare();
    if (s.ok()) s = Rounds();
    // A stop is an interrupt whatever else it broke on its way (a child it reached first).
    if (!s.ok() && !absl::IsCancelled(s) && Stopping()) s = Interrupted(v1::RUN_INTERRUPTED);
    if (session_.monitor()) {
      record_.Publish(session_.monitor(), Standing());
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
    planner_.emplace(fed(), experiment_id_, fed_dir_, &model_, &selection_);
    if (auto started = store_->GetTimeMeta("started_at"); started.ok() && *started) {
      record_.SetStart(absl::FromUnixMicros(static_cast<int64_t>(std::llround(**started * 1e6))));
    }
    SEXTANT_ASSIGN_OR_RETURN(RoundsTable rounds, RoundsTable::Open(run_dir_->db_path()));
    rounds_ = std::make_unique<RoundsTable>(std::move(rounds));
    optimizer_ = MakeServerOptimizer(fed());
    history_.emplace(
        &model_, optimizer_.get(), rounds_.get(), store_,
        std::filesystem::absolute(run_dir_->checkpoints_dir() + "/federation").string(),
        run_dir_->path() + "/model");
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
    // Client-level DP (privacy_budget.h); a resumed run composes its completed rounds.
    SEXTANT_ASSIGN_OR_RETURN(privacy_, PrivacyBudget::Create(fed(), last_round_));
    return StartServer();
  }

  absl::Status Restore() {
    SEXTANT_ASSIGN_OR_RETURN(const ModelHistory::Restored r, history_->Restore());
    if (r.round == 0) return absl::OkStatus();  // nothing completed yet
    last_round_ = r.round;
    // Without an evaluator the last score is the clients' of the committed round (its global
    // row comes first), which no one can compute again.
    if (!r.rows.empty()) {
      score_->Restore(ModelScore{r.rows[0].loss, r.rows[0].accuracy, r.rows[0].clients});
    }
    *env_.out << "sextant: resuming after round " << last_round_ << "\n";
    return selection_.Restore();
  }

  // The global tier: the regions' aggregators send to it. With hide_region_sums its SecAgg hub
  // runs the regions' round, in which the aggregators are the clients.
  absl::Status StartServer() {
    SEXTANT_ASSIGN_OR_RETURN(TierOptions o,
                             GlobalTierOptions(fed(), experiment_id_, model_.size(), fed_dir_));
    o.listen = options_.listen;
    // The session's TLS/mTLS and token rules, as for the worker service (search/search_run.cc).
    ServerSecurity& security = session_.security();
    // Signed anew by every session of the run, each plan valid for kPlanLifetime.
    SEXTANT_RETURN_IF_ERROR(
        hand_joins_.Serve(&o, session_.tls_dir(), experiment_id_, env_.clock->Now(), kPlanLifetime,
                          [&](const v1::FederatedRegion& r) {
                            return AggregatorRunFlags(r.name(), experiment_id_, model_.size());
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

  // How this run starts its own participants (region_launch.h).
  RegionLaunch Launch() const {
    RegionLaunch l;
    l.spec = &spec_;
    l.hand_joins = &hand_joins_;
    l.worker_binary = session_.worker_binary();
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

  // Starts billing, then the participants of each region not started by hand.
  absl::Status LaunchParticipants() {
    SEXTANT_RETURN_IF_ERROR(StartBilling());
    std::filesystem::create_directories(run_dir_->logs_dir());
    return LaunchRegions(Launch(), tier_->port(), *participants_);
  }

  // Publishes round `round` on the tier (RoundPlanner::Plan).
  absl::Status PublishRound(int64_t round) {
    SEXTANT_ASSIGN_OR_RETURN(RoundPlan plan, planner_->Plan(round, record_.EventTime()));
    SEXTANT_RETURN_IF_ERROR(tier_->OpenRound(std::move(plan)));
    published_round_ = round;
    return absl::OkStatus();
  }

  // Finishes one closed round: server step, evaluation, checkpoint, rows. OK, or the first
  // step's error (the run ends with it).
  absl::Status CompleteRound(int64_t round, const RoundOutcome& outcome,
                             const std::vector<SenderReport>& senders) {
    planner_->Observe(outcome.mean);
    // A copy of the mean only to add central noise to; otherwise the step reads it in place.
    const bool central_noise = privacy_ && privacy_->central_noise();
    std::vector<float> noisy;
    if (central_noise) {
      noisy.assign(outcome.mean.begin(), outcome.mean.end());
      SEXTANT_RETURN_IF_ERROR(
          privacy_->AddCentralNoise(absl::MakeSpan(noisy), outcome.total_weight));
    }
    // A file-backed model is stepped a range at a time, each range's pages given back at once.
    SEXTANT_RETURN_IF_ERROR(optimizer_->Step(model_.values(), central_noise ? noisy : outcome.mean,
                                             kStepRangeFloats,
                                             [&](size_t at, size_t n) { model_.Release(at, n); }));
    // The round's mean is spent: a large model's evaluation, checkpoint and files then read the
    // model without the mean beside it in memory.
    if (model_.mapped() && !Buffered(fed()) && !fed().hide_region_sums()) tier_->ReleaseOutcome();
    std::optional<double> epsilon;
    if (privacy_) epsilon = privacy_->ComposeThrough(round);
    std::vector<RoundRow> rows;
    SEXTANT_RETURN_IF_ERROR(score_->AfterRound(round, outcome.metrics, model_));
    const ModelScore& score = score_->last();
    // Rejections: regional updates turned away here plus client updates each region rejected.
    int64_t rejected = outcome.rejected;
    for (const SenderReport& s : senders) rejected += s.rejected;
    rows.push_back({round, "", score.accuracy, score.loss, outcome.count, rejected, epsilon,
                    record_.Seconds()});
    for (const SenderReport& s : MergeBySender(senders)) {
      rows.push_back({round, s.client_id, s.metrics.eval_accuracy, s.metrics.eval_loss, s.count,
                      s.rejected, std::nullopt, record_.Seconds()});
    }
    failures_.RecordRegionsSittingOut(round, record_.Seconds(), rows);
    // The checkpoint is the commit point and carries the rows (ModelHistory::Commit).
    SEXTANT_RETURN_IF_ERROR(history_->Commit(round, rows));
    if (epsilon) {
      SEXTANT_RETURN_IF_ERROR(store_->PutMeta("privacy", privacy_->ToJson(round)));
    }
    std::string line = absl::StrFormat("round=%d accuracy=%.4f loss=%.4f clients=%d rejected=%d",
                                       round, score.accuracy, score.loss, outcome.count, rejected);
    if (epsilon) absl::StrAppendFormat(&line, " epsilon=%.4f", *epsilon);
    if (failures_.clients_failed() > 0) {
      absl::StrAppend(&line, " failed=", failures_.clients_failed());
    }
    if (options_.federated_trial) {
      // The trial's metrics at this fidelity (search.fidelity.name: rounds), for its worker.
      absl::StrAppendFormat(&line, " rounds=%d val_accuracy=%.17g val_loss=%.17g", round,
                            score.accuracy, score.loss);
    }
    (void)store_->AddEvent(record_.EventTime(), "round", 0, line);
    *env_.out << "sextant: " << line << "\n" << std::flush;
    last_round_ = round;
    record_.Publish(session_.monitor(), Standing());
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
    record_.PutTrial(v1::RUNNING, Standing());
    record_.Publish(session_.monitor(), Standing());
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
      if (absl::Status s = bill_.CheckBefore(round, last_round_, record_.EventTime(), *env_.out);
          !s.ok()) {
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
      SEXTANT_RETURN_IF_ERROR(bill_.CloseRound(round, record_.EventTime()));
      failures_.RoundCompleted();
      if (round == options_.pause_after_round && round < fed().rounds())
        return record_.PausedAtRung(Standing());
    }
    return Finish();
  }

  // With resources.pools, bills the run (RunBill); the participants this run starts are
  // billed on their pools and taken back at their markets from their launch, those started by
  // hand as they join (HandJoins::Bill).
  absl::Status StartBilling() {
    SEXTANT_RETURN_IF_ERROR(bill_.Start(record_.start(), &*participants_));
    if (bill_.billing() && !hand_joins_.all()) {
      participants_->SetMarket(bill_.billing()->placement(), bill_.billing(),
                               SpotMarketSeed(fed(), last_round_));
    }
    return absl::OkStatus();
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
    return why ? record_.Failed(*why, Standing()) : absl::OkStatus();
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
    const absl::Duration wait =
        hand_joins_.any() ? absl::InfiniteDuration() : absl::Seconds(kStartupWaitSeconds + 60);
    absl::StatusOr<std::vector<std::string>> missing =
        tier_->AwaitContact(regions, wait, [&] { return Interruption(); });
    if (!missing.ok()) return StoppedBy(missing.status());
    tier_->hub().RestartDeadline();
    (void)store_->AddEvent(
        record_.EventTime(), "federation_ready", 0,
        missing->empty()
            ? absl::StrFormat("every region's clients are up after %.1f s", record_.Seconds())
            : absl::StrCat("regions not up when round ", published_round_,
                           "'s deadline started: ", absl::StrJoin(*missing, ", ")));
    return absl::OkStatus();
  }

  // Why a wait must end now: a stop (Cancelled), the wall-time budget (ResourceExhausted) or an
  // aggregator that exited (Unavailable); OK to go on waiting.
  absl::Status Interruption() {
    hand_joins_.Bill(bill_.billing(), store_, record_.EventTime());
    record_.Publish(session_.monitor(), Standing());  // waits poll this often
    if (tier_) ShowFailures();
    if (Stopping()) return absl::CancelledError("asked to stop");
    // budget.max_wall_time (none: never), or budget.max_cost.
    const double wall = spec_.budget().max_wall_time_seconds();
    if ((wall > 0 && record_.Seconds() > wall) ||
        bill_.Reached(published_round_, last_round_, record_.EventTime(), *env_.out)) {
      return absl::ResourceExhaustedError("the wall-time or cost budget is spent");
    }
    if (!participants_->Poll()) {
      return absl::UnavailableError(
          absl::StrCat("an aggregator exited; see ", run_dir_->logs_dir(), "/aggregator-*.log"));
    }
    return absl::OkStatus();
  }

  // The exit code for a wait that Interruption() ended.
  absl::Status StoppedBy(const absl::Status& why) {
    if (absl::IsCancelled(why)) return Interrupted(v1::RUN_INTERRUPTED);
    if (absl::IsResourceExhausted(why)) return Interrupted(v1::RUN_BUDGET_EXHAUSTED);
    return why;
  }

  // Where the run stands (RunRecord).
  RunStanding Standing() const {
    RunStanding s;
    s.last_round = last_round_;
    s.published_round = published_round_;
    s.score = score_->last();
    s.preemptions = bill_.Preemptions();
    if (const FederatedBilling* billing = bill_.billing()) {
      s.cost = billing->Committed();
      s.transfer = billing->transfer();
    }
    if (privacy_) s.epsilon = privacy_->epsilon();
    s.clients = participants_->clients();
    s.clients_per_round = ClientsPerRound(fed());
    return s;
  }

  // The epsilon target is reached: the run ends normally before the round that would pass it.
  absl::Status EpsilonReached(const absl::Status& why) {
    score_->EvaluateAgainIfNone(last_round_, model_.values());  // resumed: evaluate again
    if (last_round_ >= 1) SEXTANT_RETURN_IF_ERROR(history_->WriteFinal());
    return record_.EpsilonReached(std::string(why.message()), Standing());
  }

  // A signal (INTERRUPTED) or a spent budget (BUDGET_EXHAUSTED): the budget ends the run
  // normally, and its model is final; an interrupted run resumes.
  absl::Status Interrupted(v1::RunState state) {
    if (state != v1::RUN_INTERRUPTED && last_round_ >= 1) {
      SEXTANT_RETURN_IF_ERROR(history_->WriteFinal());
    }
    return record_.Stopped(state, Standing(), run_dir_path_);
  }

  absl::Status Finish() {
    // Every round failed: there is no model to report, and no score (never a made-up 0).
    if (last_round_ == 0) {
      return record_.Failed(
          absl::StrCat("no round completed: every one of the ", fed().rounds(), " rounds failed",
                       failures_.last_failure().empty() ? "" : " (last: ", failures_.last_failure(),
                       failures_.last_failure().empty() ? "" : ")",
                       ". Each participant's log is in ", run_dir_->logs_dir()),
          Standing());
    }
    if (failures_.failed_in_a_row() > 0) {
      *env_.out << "sextant: the last " << failures_.failed_in_a_row()
                << " rounds failed; the model is round " << last_round_ << "'s\n";
    }
    score_->EvaluateAgainIfNone(last_round_, model_.values());  // resumed at the end
    if (last_round_ >= 1) SEXTANT_RETURN_IF_ERROR(history_->WriteFinal());
    return record_.Completed(Standing());
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
  std::string fed_dir_, experiment_id_;
  std::unique_ptr<RoundsTable> rounds_;
  SelectionRecord selection_;            // federation.client_selection's speeds and counts
  std::string spec_file_;                // the experiment, for the participants and the evaluator
  std::optional<GlobalScore> score_;     // the global model's score (made in the constructor)
  GlobalModel model_;                    // in memory, or a mapped file in the federation folder
  std::optional<RoundPlanner> planner_;  // the rounds' plans (from Prepare on)
  std::unique_ptr<ServerOptimizer> optimizer_;
  std::optional<ModelHistory> history_;   // checkpoints and model files (from Prepare on)
  std::optional<PrivacyBudget> privacy_;  // with federation.dp
  HandJoins hand_joins_;                  // its join handlers outlive the tier that calls them
  std::unique_ptr<Tier> tier_;            // the global tier of the rounds
  // The participants' instances and the regions' transfer, with resources.pools; else null.
  RunBill bill_;  // with resources.pools: the participants' instances and the transfer
  int64_t last_round_ = 0;
  int64_t published_round_ = -1;
  RoundFailures failures_;              // the participants' failures and the rounds that failed
  RunRecord record_;                    // the run as trial 1, its metrics and its end
  std::unique_ptr<Provider> provider_;  // where participants_ run
  std::optional<Participants> participants_;  // from the constructor on
};

}  // namespace

absl::Status RunFederated(RunSession& session) { return FederatedRun(session).Main(); }

}  // namespace sextant
