#include "federation/round_coordinator.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "federation/dp_noise.h"
#include "federation/robust_aggregation.h"

namespace sextant {

absl::StatusOr<AggregationRule> MakeAggregationRule(absl::string_view name, double trim_fraction,
                                                    int64_t byzantine, int64_t selected) {
  AggregationRule rule;
  rule.trim_fraction = trim_fraction;
  rule.byzantine = byzantine;
  rule.selected = selected;
  if (name == "fedavg" || name.empty()) {
    rule.kind = AggregationRule::Kind::kWeightedMean;
  } else if (name == "median") {
    rule.kind = AggregationRule::Kind::kMedian;
  } else if (name == "trimmed_mean") {
    rule.kind = AggregationRule::Kind::kTrimmedMean;
  } else if (name == "krum") {
    rule.kind = AggregationRule::Kind::kKrum;
  } else if (name == "multi_krum") {
    rule.kind = AggregationRule::Kind::kMultiKrum;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown aggregation rule '", name, "'"));
  }
  if (!(trim_fraction >= 0 && trim_fraction < 0.5)) {
    return absl::InvalidArgumentError("trim_fraction must be in [0, 0.5)");
  }
  if (byzantine < 0 || selected < 0) {
    return absl::InvalidArgumentError("byzantine_clients and krum_selected must be >= 0");
  }
  return rule;
}

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

namespace {

int FoldThreads(int asked) {
  if (asked > 0) return asked;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
}

}  // namespace

RoundCoordinator::RoundCoordinator(RoundCoordinatorOptions options, Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      gate_(options_.experiment_id, options_.model_size),
      average_(options_.model_size, FoldThreads(options_.fold_threads)) {}

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
  staging_owner_.clear();
  ResetBuffer();
  return absl::OkStatus();
}

void RoundCoordinator::ResetBuffer() {
  average_.Reset();
  kept_.clear();
  count_ = 0;
  senders_ = 0;
  sums_ = SenderMetrics{};
  eval_weight_ = 0;
  total_weight_ = 0;
  rejected_at_open_ = total_rejections();
  if (buffered()) gate_.StartBuffer();
}

void RoundCoordinator::ResumeBuffering() {
  if (!buffered() || !draining_) return;
  draining_ = false;
  ResetBuffer();
  // An update that finished during the drain (its sender still owns the staging buffer).
  if (fold_pending_) {
    gate_.MarkDelivered(staging_owner_);
    (void)FoldStaged();
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
  if (!staging_owner_.empty() && staging_owner_ != header.client_id) {
    return absl::UnavailableError(
        absl::StrCat("the update from '", staging_owner_, "' is being received"));
  }
  if (draining_) return absl::UnavailableError("the buffer is being applied");
  if (buffered() && count_ >= options_.min_updates && staging_owner_ != header.client_id) {
    return absl::UnavailableError("the buffer is full; it takes updates again once applied");
  }
  if (absl::Status s = gate_.Admit(header, total_size); !s.ok()) return s;
  staging_factor_ =
      buffered() ? StalenessFactor(options_.buffer, gate_.Staleness(header.round)) : 1;
  if (count < 1) {
    gate_.Abandon(header.client_id);
    return absl::InvalidArgumentError(absl::StrCat("count must be >= 1, got ", count));
  }
  staging_owner_ = header.client_id;
  staging_weight_ = options_.clip_norm > 0 ? 1.0 : header.num_examples;
  staging_count_ = count;
  staged_ = 0;
  if (!stages_in_file()) {
    staging_.resize(options_.model_size);
    return absl::OkStatus();
  }
  if (staging_file_.size() == 0) {
    absl::StatusOr<StagingBuffer> file =
        StagingBuffer::Create(options_.staging_dir, options_.model_size * sizeof(float));
    if (!file.ok()) {
      staging_owner_.clear();
      gate_.Abandon(header.client_id);
      return file.status();  // Unavailable, naming the folder and the system's reason
    }
    staging_file_ = *std::move(file);
  }
  return absl::OkStatus();
}

absl::Status RoundCoordinator::Drop(absl::string_view client_id, absl::Status status) {
  if (staging_owner_ == client_id) staging_owner_.clear();
  return status;
}

absl::Status RoundCoordinator::AddChunk(absl::string_view client_id, size_t offset,
                                        absl::Span<const float> values) {
  if (staging_owner_ != client_id) {
    // Either the round closed under it (the gate reports Aborted) or nothing is in flight.
    return gate_.CheckValues(client_id, values);
  }
  if (absl::Status s = gate_.CheckValues(client_id, values); !s.ok()) return Drop(client_id, s);
  if (offset != staged_ || values.size() > options_.model_size - staged_) {
    gate_.Abandon(client_id);
    return Drop(client_id, absl::InvalidArgumentError(absl::StrCat(
                               "chunk at offset ", offset, " with ", values.size(),
                               " values; expected offset ", staged_, " of ", options_.model_size)));
  }
  if (stages_in_file()) {
    const absl::Status written = staging_file_.Write(
        staged_ * sizeof(float), absl::MakeConstSpan(reinterpret_cast<const char*>(values.data()),
                                                     values.size() * sizeof(float)));
    if (!written.ok()) {
      gate_.Abandon(client_id);
      return Drop(client_id, absl::UnavailableError(absl::StrCat("cannot stage the update in ",
                                                                 options_.staging_dir, ": ",
                                                                 written.message())));
    }
  } else {
    std::copy(values.begin(), values.end(), staging_.begin() + staged_);
  }
  staged_ += values.size();
  return absl::OkStatus();
}

absl::Status RoundCoordinator::Finish(absl::string_view client_id, const SenderMetrics& metrics) {
  if (staging_owner_ != client_id) return gate_.Accept(client_id);
  if (staged_ != options_.model_size) {
    gate_.Abandon(client_id);
    return Drop(client_id,
                absl::InvalidArgumentError(absl::StrCat("update ended after ", staged_, " of ",
                                                        options_.model_size, " values")));
  }
  if (absl::Status s = gate_.Accept(client_id); !s.ok()) return Drop(client_id, s);
  staging_metrics_ = metrics;
  // While the last buffer drains, the update waits, staged, for the next one (ResumeBuffering).
  if (draining_) {
    fold_pending_ = true;
    return absl::OkStatus();
  }
  return FoldStaged();
}

absl::Status RoundCoordinator::FoldStaged() {
  std::string sender = std::move(staging_owner_);
  staging_owner_.clear();
  fold_pending_ = false;
  count_ += staging_count_;
  ++senders_;
  if (stages_in_file()) {
    SEXTANT_RETURN_IF_ERROR(FoldStagedFile());
    AddMetrics(staging_weight_, staging_metrics_);
    return absl::OkStatus();
  }
  if (options_.clip_norm > 0) {
    double norm = 0;
    // The gate checked every value, so the clip cannot fail.
    SEXTANT_RETURN_IF_ERROR(ClipToL2Norm(absl::MakeSpan(staging_), options_.clip_norm, &norm));
    if (norm > options_.clip_norm) ++clipped_;
  }
  if (keeps_updates()) {
    // Kept whole for Close; the next Begin stages into a fresh buffer.
    kept_.push_back(Kept{std::move(sender), std::move(staging_), staging_weight_, staging_factor_,
                         staging_metrics_});
    staging_ = std::vector<float>();
    return absl::OkStatus();
  }
  // The gate checked every value and the weight, so the fold cannot fail.
  SEXTANT_RETURN_IF_ERROR(average_.AddDamped(staging_, staging_weight_, staging_factor_));
  AddMetrics(staging_weight_, staging_metrics_);
  return absl::OkStatus();
}

void RoundCoordinator::AddMetrics(double weight, const SenderMetrics& metrics) {
  sums_.train_loss += weight * metrics.train_loss;
  if (metrics.eval_weight > 0 && std::isfinite(metrics.eval_loss)) {
    sums_.eval_loss += metrics.eval_weight * metrics.eval_loss;
    sums_.eval_accuracy += metrics.eval_weight * metrics.eval_accuracy;
    eval_weight_ += metrics.eval_weight;
  }
}

absl::Status RoundCoordinator::FoldStagedFile() {
  const size_t n = options_.model_size;
  file_chunk_.resize(std::min<size_t>(n, size_t{1} << 20));
  // Reads the staged floats [at, at + k) into file_chunk_.
  auto read = [&](size_t at, size_t k) -> absl::Status {
    return staging_file_.Read(
        at * sizeof(float),
        absl::MakeSpan(reinterpret_cast<char*>(file_chunk_.data()), k * sizeof(float)));
  };
  double scale = 1;
  if (options_.clip_norm > 0) {
    double squares = 0;
    for (size_t at = 0; at < n; at += file_chunk_.size()) {
      const size_t k = std::min(file_chunk_.size(), n - at);
      SEXTANT_RETURN_IF_ERROR(read(at, k));
      for (size_t i = 0; i < k; ++i)
        squares += static_cast<double>(file_chunk_[i]) * file_chunk_[i];
    }
    const double norm = std::sqrt(squares);
    if (norm > options_.clip_norm) {
      scale = options_.clip_norm / norm;
      ++clipped_;
    }
  }
  for (size_t at = 0; at < n; at += file_chunk_.size()) {
    const size_t k = std::min(file_chunk_.size(), n - at);
    SEXTANT_RETURN_IF_ERROR(read(at, k));
    if (scale != 1) {
      for (size_t i = 0; i < k; ++i) file_chunk_[i] = static_cast<float>(file_chunk_[i] * scale);
    }
    // The gate checked every value as it arrived, so a range cannot fail part-way.
    SEXTANT_RETURN_IF_ERROR(average_.AddDampedRange(at, absl::MakeConstSpan(file_chunk_.data(), k),
                                                    staging_weight_, staging_factor_));
  }
  average_.EndRanges(staging_weight_);
  return absl::OkStatus();
}

void RoundCoordinator::Abandon(absl::string_view client_id) {
  gate_.Abandon(client_id);
  if (staging_owner_ == client_id) staging_owner_.clear();
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
  if (buffered()) return !draining_ && count_ >= options_.min_updates;
  // Failed participants will not deliver: waiting for them would wait for nothing.
  if (gate_.accepted() + static_cast<size_t>(failed_count()) >= participants_.size()) return true;
  return DeadlinePassed() && count_ >= options_.min_updates;
}

absl::StatusOr<RoundOutcome> RoundCoordinator::Close() {
  if (!gate_.round_open()) return absl::FailedPreconditionError("no round is open");
  if (senders_ == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("round ", gate_.round(), " has no accepted update"));
  }
  if (draining_) return absl::FailedPreconditionError("the buffer is being applied");
  if (buffered()) {
    draining_ = true;  // the update being staged, if any, goes on into the next buffer
  } else {
    gate_.CloseRound();
    staging_owner_.clear();
  }
  RoundOutcome out;
  out.round = gate_.round();
  if (keeps_updates()) {
    absl::StatusOr<int64_t> excluded = TakeKept();
    if (!excluded.ok()) return excluded.status();
    out.excluded = *excluded;
  }
  if (options_.rule.robust()) {
    out.mean = robust_out_;
    out.total_weight = total_weight_;
  } else {
    out.mean = average_.mean();
    out.total_weight = average_.total_weight();
  }
  out.count = count_;
  out.senders = senders_;
  out.rejected = total_rejections() - rejected_at_open_;
  out.metrics.train_loss = sums_.train_loss / out.total_weight;
  if (eval_weight_ > 0) {
    out.metrics.eval_loss = sums_.eval_loss / eval_weight_;
    out.metrics.eval_accuracy = sums_.eval_accuracy / eval_weight_;
    out.metrics.eval_weight = eval_weight_;
  }
  return out;
}

absl::StatusOr<int64_t> RoundCoordinator::TakeKept() {
  std::stable_sort(kept_.begin(), kept_.end(),
            [](const Kept& a, const Kept& b) { return a.sender < b.sender; });
  int64_t excluded = 0;
  for (const Kept& k : kept_) {
    AddMetrics(k.weight, k.metrics);
    if (options_.rule.robust()) {
      total_weight_ += k.weight;
    } else {
      // The gate checked every value and the weight, so the fold cannot fail.
      SEXTANT_RETURN_IF_ERROR(average_.AddDamped(k.values, k.weight, k.factor));
    }
  }
  if (options_.rule.robust()) {
    absl::StatusOr<int64_t> left_out = AggregateKept();
    if (!left_out.ok()) return left_out.status();
    excluded = *left_out;
  }
  kept_.clear();
  return excluded;
}

// Krum needs n >= 2f + 3: with fewer updates f shrinks to what they allow, and below three
// updates (where no f fits) the round falls back to the plain mean, so that a round with few
// survivors still produces a model.
absl::StatusOr<int64_t> RoundCoordinator::AggregateKept() {
  std::vector<absl::Span<const float>> views;
  for (const Kept& k : kept_) views.push_back(k.values);
  const int64_t n = static_cast<int64_t>(views.size());
  robust_out_.assign(options_.model_size, 0.0f);
  const AggregationRule& rule = options_.rule;
  switch (rule.kind) {
    case AggregationRule::Kind::kMedian: {
      absl::Status s = CoordinateMedian(views, absl::MakeSpan(robust_out_));
      if (!s.ok()) return s;
      return 0;
    }
    case AggregationRule::Kind::kTrimmedMean: {
      absl::Status s = TrimmedMean(views, rule.trim_fraction, absl::MakeSpan(robust_out_));
      if (!s.ok()) return s;
      return 0;
    }
    case AggregationRule::Kind::kKrum:
    case AggregationRule::Kind::kMultiKrum:
    case AggregationRule::Kind::kWeightedMean:
      break;
  }
  const int64_t f = std::min<int64_t>(rule.byzantine, (n - 3) / 2);
  if (n < 3 || f < 0) {
    absl::Status s = TrimmedMean(views, 0, absl::MakeSpan(robust_out_));
    if (!s.ok()) return s;
    return 0;
  }
  const int64_t m = rule.kind == AggregationRule::Kind::kKrum ? 1
                    : rule.selected > 0                       ? std::min(rule.selected, n)
                                                              : n - f;
  absl::StatusOr<std::vector<size_t>> chosen =
      MultiKrum(views, static_cast<size_t>(f), static_cast<size_t>(m), absl::MakeSpan(robust_out_));
  if (!chosen.ok()) return chosen.status();
  return n - static_cast<int64_t>(chosen->size());
}

}  // namespace sextant
