#include "federation/round_coordinator.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sextant {

double StalenessFactor(const BufferPolicy& policy, int64_t staleness) {
  if (policy.weighting == BufferPolicy::Weighting::kConstant || staleness <= 0) return 1.0;
  return std::pow(1.0 + static_cast<double>(staleness), -policy.exponent);
}

absl::StatusOr<RoundCoordinator> RoundCoordinator::Create(RoundCoordinatorOptions options,
                                                          Clock* clock) {
  if (options.experiment_id.empty()) return absl::InvalidArgumentError("experiment_id is empty");
  if (options.model_size == 0) return absl::InvalidArgumentError("model_size is 0");
  if (options.min_updates < 1) return absl::InvalidArgumentError("min_updates must be >= 1");
  if (absl::StatusOr<AggregationRule> rule = MakeAggregationRule(
          "fedavg", options.rule.trim_fraction, options.rule.byzantine, options.rule.selected);
      !rule.ok()) {
    return rule.status();
  }
  if (!(options.deadline_seconds >= 0)) {
    return absl::InvalidArgumentError("deadline_seconds must be >= 0");
  }
  if (!(options.clip_norm >= 0 && std::isfinite(options.clip_norm))) {
    return absl::InvalidArgumentError("clip_norm must be finite and >= 0");
  }
  if (!options.staging_dir.empty() && options.rule.robust()) {
    return absl::InvalidArgumentError("a robust rule keeps every update in memory: no staging_dir");
  }
  if (options.ordered && options.model_size >= options.file_staging_from &&
      !options.staging_dir.empty()) {
    return absl::InvalidArgumentError(
        "an ordered fold keeps every update in memory: not with a model staged in a file");
  }
  if (options.buffer.enabled) {
    if (options.rule.robust()) {
      return absl::InvalidArgumentError("buffered aggregation needs the weighted mean (fedavg)");
    }
    if (options.buffer.max_staleness < 0 || !(options.buffer.exponent >= 0)) {
      return absl::InvalidArgumentError("max_staleness and the staleness exponent must be >= 0");
    }
  }
  RoundCoordinator c(std::move(options), clock);
  if (c.buffered())
    c.gate_.SetBuffered(c.options_.buffer.max_staleness, c.options_.buffer.distinct_senders);
  return c;
}

RoundCoordinator::RoundCoordinator(RoundCoordinatorOptions options, Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      gate_(options_.experiment_id, options_.model_size),
      accumulator_({options_.model_size, options_.rule, options_.fold_threads, options_.clip_norm,
                    options_.staging_dir, options_.file_staging_from, options_.ordered}) {}

int64_t RoundCoordinator::total_rejections() const {
  int64_t total = 0;
  for (size_t r = 0; r < kNumRejectReasons; ++r)
    total += gate_.rejections(static_cast<RejectReason>(r));
  return total;
}

absl::Status RoundCoordinator::OpenRound(int64_t round, std::vector<std::string> participants) {
  if (participants.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("round ", round, " has no participants"));
  }
  if (absl::Status s = gate_.OpenRound(round, participants); !s.ok()) return s;
  participants_ = std::move(participants);
  failed_.clear();
  opened_at_ = clock_->Now();
  if (buffered()) {
    ResumeBuffering();
    return absl::OkStatus();
  }
  accumulator_.Unstage();
  ResetBuffer();
  return absl::OkStatus();
}

void RoundCoordinator::ResetBuffer() {
  accumulator_.Reset();
  rejected_at_open_ = total_rejections();
  if (buffered()) gate_.StartBuffer();
}

void RoundCoordinator::ResumeBuffering() {
  if (!buffered() || !draining_) return;
  draining_ = false;
  ResetBuffer();
  // An update that finished during the drain (its sender still owns the staging buffer).
  if (fold_pending_) {
    fold_pending_ = false;
    gate_.MarkDelivered(accumulator_.staging_owner());
    (void)accumulator_.FoldStaged(pending_metrics_);
  }
}

void RoundCoordinator::RestartDeadline() {
  if (gate_.round_open()) opened_at_ = clock_->Now();
}

void RoundCoordinator::SetCloseRule(double deadline_seconds, int64_t min_updates) {
  options_.deadline_seconds = deadline_seconds >= 0 ? deadline_seconds : 0;
  options_.min_updates = std::max<int64_t>(1, min_updates);
}

absl::Status RoundCoordinator::Begin(const UpdateHeader& header, size_t total_size, int64_t count) {
  const std::string& owner = accumulator_.staging_owner();
  if (!owner.empty() && owner != header.client_id) {
    return absl::UnavailableError(absl::StrCat("the update from '", owner, "' is being received"));
  }
  if (draining_) return absl::UnavailableError("the buffer is being applied");
  if (buffered() && accumulator_.count() >= options_.min_updates && owner != header.client_id) {
    return absl::UnavailableError("the buffer is full; it takes updates again once applied");
  }
  if (absl::Status s = gate_.Admit(header, total_size); !s.ok()) return s;
  const double factor =
      buffered() ? StalenessFactor(options_.buffer, gate_.Staleness(header.round)) : 1;
  if (count < 1) {
    gate_.Abandon(header.client_id);
    return absl::InvalidArgumentError(absl::StrCat("count must be >= 1, got ", count));
  }
  absl::Status staged = accumulator_.Stage(header.client_id, header.num_examples, factor, count);
  if (!staged.ok()) gate_.Abandon(header.client_id);
  return staged;
}

absl::Status RoundCoordinator::Drop(absl::string_view client_id, absl::Status status) {
  if (accumulator_.staging_owner() == client_id) accumulator_.Unstage();
  return status;
}

absl::Status RoundCoordinator::AddChunk(absl::string_view client_id, size_t offset,
                                        absl::Span<const float> values) {
  if (accumulator_.staging_owner() != client_id) {
    // Either the round closed under it (the gate reports Aborted) or nothing is in flight.
    return gate_.CheckValues(client_id, values);
  }
  if (absl::Status s = gate_.CheckValues(client_id, values); !s.ok()) return Drop(client_id, s);
  if (absl::Status s = accumulator_.Write(offset, values); !s.ok()) {
    gate_.Abandon(client_id);
    return Drop(client_id, s);
  }
  return absl::OkStatus();
}

absl::Status RoundCoordinator::Finish(absl::string_view client_id, const SenderMetrics& metrics) {
  if (accumulator_.staging_owner() != client_id) return gate_.Accept(client_id);
  if (absl::Status s = accumulator_.CheckWhole(); !s.ok()) {
    gate_.Abandon(client_id);
    return Drop(client_id, s);
  }
  if (absl::Status s = gate_.Accept(client_id); !s.ok()) return Drop(client_id, s);
  // While the last buffer drains, the update waits, staged, for the next one (ResumeBuffering).
  if (draining_) {
    fold_pending_ = true;
    pending_metrics_ = metrics;
    return absl::OkStatus();
  }
  fold_pending_ = false;
  return accumulator_.FoldStaged(metrics);
}

void RoundCoordinator::Abandon(absl::string_view client_id) {
  gate_.Abandon(client_id);
  if (accumulator_.staging_owner() == client_id) accumulator_.Unstage();
}

bool RoundCoordinator::DeadlinePassed() const {
  return options_.deadline_seconds > 0 &&
         clock_->Now() - opened_at_ >= absl::Seconds(options_.deadline_seconds);
}

absl::Status RoundCoordinator::MarkFailed(absl::string_view client_id) {
  if (!gate_.round_open() || buffered()) {
    return absl::FailedPreconditionError("no synchronous round is open");
  }
  if (std::find(participants_.begin(), participants_.end(), client_id) == participants_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat(client_id, " is not a participant of round ", gate_.round()));
  }
  if (gate_.delivered(client_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat(client_id, " delivered its update for round ", gate_.round()));
  }
  failed_.insert(std::string(client_id));
  return absl::OkStatus();
}

std::vector<std::string> RoundCoordinator::failed() const {
  std::vector<std::string> out;
  for (const std::string& id : failed_) {
    if (!gate_.delivered(id)) out.push_back(id);
  }
  return out;
}

int64_t RoundCoordinator::failed_count() const {
  int64_t n = 0;
  for (const std::string& id : failed_) n += !gate_.delivered(id);
  return n;
}

bool RoundCoordinator::ReadyToClose() const {
  if (!gate_.round_open()) return false;
  if (buffered()) return !draining_ && accumulator_.count() >= options_.min_updates;
  // Failed participants will not deliver: waiting for them would wait for nothing.
  if (gate_.accepted() + static_cast<size_t>(failed_count()) >= participants_.size()) return true;
  return DeadlinePassed() && accumulator_.count() >= options_.min_updates;
}

absl::StatusOr<RoundOutcome> RoundCoordinator::Close() {
  if (!gate_.round_open()) return absl::FailedPreconditionError("no round is open");
  if (accumulator_.senders() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("round ", gate_.round(), " has no accepted update"));
  }
  if (draining_) return absl::FailedPreconditionError("the buffer is being applied");
  if (buffered()) {
    draining_ = true;  // the update being staged, if any, goes on into the next buffer
  } else {
    gate_.CloseRound();
    accumulator_.Unstage();
  }
  absl::StatusOr<RoundOutcome> out = accumulator_.Take();
  if (!out.ok()) return out.status();
  out->round = gate_.round();
  out->rejected = total_rejections() - rejected_at_open_;
  return out;
}

}  // namespace sextant
