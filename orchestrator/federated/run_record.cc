#include "orchestrator/federated/run_record.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "aggregator/federation_plan.h"
#include "common/status_macros.h"

namespace sextant {

std::vector<RoundRow> RoundRows(int64_t round, const ModelScore& score, const RoundOutcome& outcome,
                                const std::vector<SenderReport>& senders,
                                std::optional<double> epsilon, double seconds) {
  int64_t rejected = outcome.rejected;
  for (const SenderReport& s : senders) rejected += s.rejected;
  std::vector<RoundRow> rows;
  rows.push_back(
      {round, "", score.accuracy, score.loss, outcome.count, rejected, epsilon, seconds});
  for (const SenderReport& s : MergeBySender(senders)) {
    rows.push_back({round, s.client_id, s.metrics.eval_accuracy, s.metrics.eval_loss, s.count,
                    s.rejected, std::nullopt, seconds});
  }
  return rows;
}

void RunRecord::Started(const std::string& run_dir, size_t parameters, const RunStanding& s,
                        RunMonitor* monitor) {
  const v1::Federation& fed = spec_.federation();
  *out_ << "sextant: federated run " << spec_.name() << " in " << run_dir << ": "
        << fed.regions_size() << " regions, " << TotalClients(fed) << " clients, " << parameters
        << " parameters, ";
  if (s.last_round < fed.rounds()) {
    *out_ << "rounds " << s.last_round + 1 << ".." << fed.rounds() << "\n";
  } else {
    *out_ << "all " << fed.rounds() << " rounds already done\n";
  }
  *out_ << std::flush;
  PutTrial(v1::RUNNING, s);
  Publish(monitor, s);
}

void RunRecord::SayRound(const RoundRow& global, int64_t clients_failed, bool federated_trial) {
  std::string line =
      absl::StrFormat("round=%d accuracy=%.4f loss=%.4f clients=%d rejected=%d", global.round,
                      global.accuracy, global.loss, global.clients, global.rejected);
  if (global.epsilon) absl::StrAppendFormat(&line, " epsilon=%.4f", *global.epsilon);
  if (clients_failed > 0) absl::StrAppend(&line, " failed=", clients_failed);
  if (federated_trial) {
    absl::StrAppendFormat(&line, " rounds=%d val_accuracy=%.17g val_loss=%.17g", global.round,
                          global.accuracy, global.loss);
  }
  (void)store_->AddEvent(EventTime(), "round", 0, line);
  *out_ << "sextant: " << line << "\n" << std::flush;
}

RunRecord::RunRecord(const v1::ExperimentSpec& spec, Store* store, const Clock* clock,
                     std::ostream* out, absl::Time start)
    : spec_(spec), store_(store), clock_(clock), out_(out), start_(start) {}

void RunRecord::PutTrial(v1::TrialState state, const RunStanding& s) {
  TrialRow t;
  t.id = 1;
  t.state = state;
  t.params_json = "{}";
  t.attempts = 1;
  t.created_at = absl::ToUnixMicros(start_) / 1e6;
  t.fidelity = static_cast<double>(std::max<int64_t>(s.last_round, 0));
  t.preemptions = s.preemptions;
  if (state == v1::COMPLETED) {
    const bool loss = spec_.objective().metric().find("loss") != std::string::npos;
    t.value = loss ? s.score.loss : s.score.accuracy;
  }
  if (state == v1::COMPLETED || state == v1::FAILED) t.finished_at = EventTime();
  (void)store_->PutTrial(t);
  trial_ = t;
}

void RunRecord::Publish(RunMonitor* monitor, const RunStanding& s) const {
  if (monitor == nullptr) return;
  MetricsSnapshot m = monitor->Snapshot();
  m.max_trials = 1;
  if (trial_.id != 0) m.by_state[TrialStateName(trial_.state)] = 1;  // once stored
  if (trial_.value) {
    m.best_value = trial_.value;
    m.best_trial = trial_.id;
  }
  m.rounds_max = static_cast<int>(spec_.federation().rounds());
  m.rounds_done = static_cast<int>(s.last_round);
  m.workers = s.clients;
  if (s.published_round > s.last_round) {
    m.busy_workers = static_cast<int>(std::min<int64_t>(s.clients_per_round, m.workers));
  }
  if (s.cost) {
    m.spend = *s.cost;
    m.transfer_spend = s.transfer.value_or(0);
    m.participant_preemptions = s.preemptions;
  }
  if (spec_.budget().has_max_cost()) m.budget = spec_.budget().max_cost();
  monitor->Publish(m);
}

absl::Status RunRecord::RecordEnd(v1::RunState state, const std::string& why) {
  return store_->EndRun(state, EventTime(), why);
}

std::string RunRecord::SpentMetrics(const RunStanding& s) {
  std::string out;
  if (s.cost) absl::StrAppend(&out, absl::StrFormat(" cost=%.17g", *s.cost));
  if (s.epsilon) absl::StrAppend(&out, absl::StrFormat(" epsilon=%.17g", *s.epsilon));
  return out;
}

absl::Status RunRecord::Completed(const RunStanding& s) {
  PutTrial(v1::COMPLETED, s);
  SEXTANT_RETURN_IF_ERROR(RecordEnd(v1::RUN_COMPLETED));
  *out_ << absl::StrFormat(
      "sextant: %s finished: val_accuracy=%.4f val_loss=%.4f%s after %d rounds\n", spec_.name(),
      s.score.accuracy, s.score.loss, SpentMetrics(s), s.last_round);
  return absl::OkStatus();
}

absl::Status RunRecord::Failed(const std::string& why, const RunStanding& s) {
  PutTrial(v1::FAILED, s);
  SEXTANT_RETURN_IF_ERROR(RecordEnd(v1::RUN_FAILED, why));
  return absl::AbortedError(absl::StrCat("the federated run failed: ", why));
}

absl::Status RunRecord::EpsilonReached(const std::string& why, const RunStanding& s) {
  PutTrial(v1::COMPLETED, s);
  const std::string line = absl::StrCat("stopped after round ", s.last_round,
                                        ": the privacy budget is spent (", why, ")");
  SEXTANT_RETURN_IF_ERROR(RecordEnd(v1::RUN_EPSILON_EXHAUSTED, line));
  *out_ << "sextant: " << spec_.name() << " " << line
        << "; val_accuracy=" << absl::StrFormat("%.4f", s.score.accuracy) << SpentMetrics(s)
        << "\n";
  return absl::OkStatus();
}

absl::Status RunRecord::PausedAtRung(const RunStanding& s) {
  PutTrial(v1::RUNNING, s);
  SEXTANT_RETURN_IF_ERROR(RecordEnd(
      v1::RUN_INTERRUPTED, absl::StrCat("paused after round ", s.last_round, " (the rung)")));
  *out_ << absl::StrFormat(
      "sextant: %s paused after round %d (its rung): val_accuracy=%.4f val_loss=%.4f%s\n",
      spec_.name(), s.last_round, s.score.accuracy, s.score.loss, SpentMetrics(s));
  return absl::OkStatus();
}

absl::Status RunRecord::Stopped(v1::RunState state, const RunStanding& s,
                                const std::string& run_dir) {
  PutTrial(v1::RUNNING, s);  // the rounds and preemptions so far, as results reads them
  (void)store_->SetRunState(state);
  *out_ << "sextant: stopped after round " << s.last_round << "; continue with: sextant resume "
        << run_dir << "\n";
  return state == v1::RUN_INTERRUPTED ? absl::CancelledError("interrupted") : absl::OkStatus();
}

}  // namespace sextant
