#include "orchestrator/federated/federated_run.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "aggregator/federation_plan.h"
#include "aggregator/tier.h"
#include "aggregator/tier_settings.h"
#include "common/status_macros.h"
#include "federation/server_optimizer.h"
#include "orchestrator/core/rounds_table.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/core/stored_spec.h"
#include "orchestrator/cost/federated_placement.h"
#include "orchestrator/federated/federated_billing.h"
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
#include "orchestrator/federated/run_participants.h"
#include "orchestrator/federated/run_record.h"
#include "orchestrator/federated/selection_record.h"
#include "orchestrator/monitor/run_monitor.h"
#include "rpc/server_security.h"

namespace sextant {
namespace {

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
        fed_dir_(std::filesystem::absolute(run_dir_->path() + "/federation").string()),
        spec_file_(fed_dir_ + "/spec.pb"),
        selection_(store_),
        model_(fed_dir_),
        parts_(session, fed_dir_, spec_file_),
        bill_(spec_, store_, env_.clock, &parts_.hand_joins()),
        failures_(spec_.federation(), store_, env_.out, env_.clock),
        record_(spec_, store_, env_.clock, env_.out, env_.clock->Now()) {
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
    parts_.Teardown();
    if (bill_.billing()) {
      bill_.billing()->StopAll();
      if (absl::Status w = bill_.Write(); !w.ok() && s.ok()) s = w;
    }
    return s;
  }

 private:
  const v1::Federation& fed() const { return spec_.federation(); }

  absl::Status Prepare() {
    SEXTANT_RETURN_IF_ERROR(parts_.hand_joins().CheckCredentials(session_.tls_dir()));
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
    SEXTANT_RETURN_IF_ERROR(parts_.Serve(experiment_id_, model_.size()));
    tier_ = parts_.tier();
    return absl::OkStatus();
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
    SEXTANT_RETURN_IF_ERROR(StepGlobalModel(model_, *optimizer_, outcome.mean, outcome.total_weight,
                                            privacy_ ? &*privacy_ : nullptr));
    // The round's mean is spent: a large model's evaluation, checkpoint and files then read the
    // model without the mean beside it in memory.
    if (model_.mapped() && !Buffered(fed()) && !fed().hide_region_sums()) tier_->ReleaseOutcome();
    std::optional<double> epsilon;
    if (privacy_) epsilon = privacy_->ComposeThrough(round);
    SEXTANT_RETURN_IF_ERROR(score_->AfterRound(round, outcome.metrics, model_));
    std::vector<RoundRow> rows =
        RoundRows(round, score_->last(), outcome, senders, epsilon, record_.Seconds());
    failures_.RecordRegionsSittingOut(round, record_.Seconds(), rows);
    // The checkpoint is the commit point and carries the rows (ModelHistory::Commit).
    SEXTANT_RETURN_IF_ERROR(history_->Commit(round, rows));
    if (epsilon) {
      SEXTANT_RETURN_IF_ERROR(store_->PutMeta("privacy", privacy_->ToJson(round)));
    }
    record_.SayRound(rows[0], failures_.clients_failed(), options_.federated_trial);
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
    record_.Started(run_dir_path_, model_.size(), Standing(), session_.monitor());
    if (absl::Status s = CheckPrivacyBudget(); !s.ok()) return EpsilonReached(s);
    if (last_round_ < fed().rounds()) {
      SEXTANT_RETURN_IF_ERROR(PublishRound(last_round_ + 1));
      SEXTANT_RETURN_IF_ERROR(StartBilling());  // billed from their launch
      SEXTANT_RETURN_IF_ERROR(parts_.Launch());
      if (parts_.hand_joins().any()) {
        parts_.hand_joins().Announce(*env_.out, tier_->port(), experiment_id_);
      }
      if (absl::Status s = AwaitRegions(); !s.ok()) return StoppedBy(s);
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
      absl::Status ready = tier_->AwaitClosable(  // or closes with what it has: GiveUp
          fed().hide_region_sums() ? Tier::Close::kSecure : Tier::Close::kPlain, [&] {
            return failures_.GiveUp(round) ? absl::DeadlineExceededError("") : Interruption();
          });
      if (!ready.ok() && !absl::IsDeadlineExceeded(ready)) return StoppedBy(ready);
      ShowFailures();
      absl::StatusOr<ClosedRound> closed = tier_->TakeRound();
      // A synchronous round whose participants failed: no update, or too few to count.
      if (!fed().hide_region_sums() && !Buffered(fed()) &&
          (!closed.ok() || closed->outcome.count < std::max(1, fed().min_clients()))) {
        SEXTANT_RETURN_IF_ERROR(RoundFailed(round, closed.ok() ? closed->outcome.count : 0));
        continue;
      }
      if (!closed.ok()) {
        return (fed().hide_region_sums()
                    ? absl::AbortedError(absl::StrCat("the regions' secure round ", round,
                                                      " failed: ", closed.status().message()))
                    : closed.status());
      }
      SEXTANT_RETURN_IF_ERROR(selection_.Observe(closed->senders));
      std::vector<float> regions_mean;
      if (Buffered(fed())) {
        // Copied out, so that the next buffer fills while this one is applied and evaluated.
        regions_mean.assign(closed->outcome.mean.begin(), closed->outcome.mean.end());
        closed->outcome.mean = regions_mean;
        tier_->hub().ResumeBuffering();
      }
      if (bill_.billing()) bill_.billing()->MeterTransfer(tier_->transfer().Totals());
      SEXTANT_RETURN_IF_ERROR(CompleteRound(round, closed->outcome, closed->senders));
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
    SEXTANT_RETURN_IF_ERROR(bill_.Start(record_.start(), &parts_.participants()));
    if (bill_.billing() && !parts_.hand_joins().all()) {
      parts_.participants().SetMarket(bill_.billing()->placement(), bill_.billing(),
                                      SpotMarketSeed(fed(), last_round_));
    }
    return absl::OkStatus();
  }

  // Says each failure the participants reported since the last call, and a round waiting past
  // its deadline for too few updates (RoundFailures::Show), this once the regions are up.
  void ShowFailures() {
    failures_.Show(tier_->hub().TakeFailures(),
                   regions_up_ ? tier_->hub().Progress() : RoundProgress{}, last_round_);
  }

  // Round `round` closed with `count` client updates, fewer than min_clients: the model stays
  // as it was, and the next round goes on, unless max_failed_rounds rounds in a row failed.
  absl::Status RoundFailed(int64_t round, int64_t count) {
    ShowFailures();
    std::optional<std::string> why = failures_.RoundFailed(round, count, run_dir_->logs_dir());
    return why ? record_.Failed(*why, Standing()) : absl::OkStatus();
  }

  // Waits until every region's aggregator is up and starts the first round's deadline afresh
  // (RunParticipants::AwaitRegions). OK once they are, or the interruption that ended the wait.
  absl::Status AwaitRegions() {
    absl::StatusOr<std::vector<std::string>> missing =
        parts_.AwaitRegions([&] { return Interruption(); });
    if (!missing.ok()) return missing.status();
    regions_up_ = true;
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
    parts_.hand_joins().Bill(bill_.billing(), store_, record_.EventTime());
    record_.Publish(session_.monitor(), Standing());  // waits poll this often
    if (tier_) ShowFailures();
    if (Stopping()) return absl::CancelledError("asked to stop");
    // budget.max_wall_time (none: never), or budget.max_cost.
    const double wall = spec_.budget().max_wall_time_seconds();
    if ((wall > 0 && record_.Seconds() > wall) ||
        bill_.Reached(published_round_, last_round_, record_.EventTime(), *env_.out)) {
      return absl::ResourceExhaustedError("the wall-time or cost budget is spent");
    }
    if (!parts_.participants().Poll()) {
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
    s.clients = parts_.participants().clients();
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

  RunSession& session_;
  const RunOptions& options_;
  const RunEnv env_;
  const v1::ExperimentSpec& spec_;
  const std::string run_dir_path_;
  RunDir* const run_dir_;
  Store* const store_;
  const std::string fed_dir_;
  const std::string spec_file_;  // the experiment, for the participants and the evaluator
  std::string experiment_id_;
  std::unique_ptr<RoundsTable> rounds_;
  SelectionRecord selection_;            // federation.client_selection's speeds and counts
  std::optional<GlobalScore> score_;     // the global model's score (made in the constructor)
  GlobalModel model_;                    // in memory, or a mapped file in the federation folder
  std::optional<RoundPlanner> planner_;  // the rounds' plans (from Prepare on)
  std::unique_ptr<ServerOptimizer> optimizer_;
  std::optional<ModelHistory> history_;   // checkpoints and model files (from Prepare on)
  std::optional<PrivacyBudget> privacy_;  // with federation.dp
  RunParticipants parts_;  // the participants and the global tier (tier_), serving from Prepare
  Tier* tier_ = nullptr;   // the global tier of the rounds
  // The participants' instances and the regions' transfer, with resources.pools; else null.
  RunBill bill_;  // with resources.pools: the participants' instances and the transfer
  int64_t last_round_ = 0;
  int64_t published_round_ = -1;
  bool regions_up_ = false;  // the wait for the regions ended (AwaitRegions)
  RoundFailures failures_;   // the participants' failures and the rounds that failed
  RunRecord record_;         // the run as trial 1, its metrics and its end
};

}  // namespace

absl::Status RunFederated(RunSession& session) { return FederatedRun(session).Main(); }

}  // namespace sextant
