#include "federation/round_accumulator.h"

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

namespace {

int FoldThreads(int asked) {
  if (asked > 0) return asked;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
}

}  // namespace

RoundAccumulator::RoundAccumulator(RoundAccumulatorOptions options)
    : options_(std::move(options)),
      average_(options_.model_size, FoldThreads(options_.fold_threads)) {}

absl::Status RoundAccumulator::Stage(std::string sender, double weight, double factor,
                                     int64_t count) {
  staging_owner_ = std::move(sender);
  staging_weight_ = options_.clip_norm > 0 ? 1.0 : weight;
  staging_factor_ = factor;
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
      return file.status();  // Unavailable, naming the folder and the system's reason
    }
    staging_file_ = *std::move(file);
  }
  return absl::OkStatus();
}

absl::Status RoundAccumulator::Write(size_t offset, absl::Span<const float> values) {
  if (offset != staged_ || values.size() > options_.model_size - staged_) {
    return absl::InvalidArgumentError(absl::StrCat("chunk at offset ", offset, " with ",
                                                   values.size(), " values; expected offset ",
                                                   staged_, " of ", options_.model_size));
  }
  if (stages_in_file()) {
    const absl::Status written = staging_file_.Write(
        staged_ * sizeof(float), absl::MakeConstSpan(reinterpret_cast<const char*>(values.data()),
                                                     values.size() * sizeof(float)));
    if (!written.ok()) {
      return absl::UnavailableError(absl::StrCat("cannot stage the update in ",
                                                 options_.staging_dir, ": ", written.message()));
    }
  } else {
    std::copy(values.begin(), values.end(), staging_.begin() + staged_);
  }
  staged_ += values.size();
  return absl::OkStatus();
}

absl::Status RoundAccumulator::CheckWhole() const {
  if (staged_ == options_.model_size) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("update ended after ", staged_, " of ", options_.model_size, " values"));
}

absl::Status RoundAccumulator::FoldStaged(const SenderMetrics& metrics) {
  std::string sender = std::move(staging_owner_);
  staging_owner_.clear();
  count_ += staging_count_;
  ++senders_;
  if (stages_in_file()) {
    SEXTANT_RETURN_IF_ERROR(FoldStagedFile());
    AddMetrics(staging_weight_, metrics);
    return absl::OkStatus();
  }
  if (options_.clip_norm > 0) {
    double norm = 0;
    // The gate checked every value, so the clip cannot fail.
    SEXTANT_RETURN_IF_ERROR(ClipToL2Norm(absl::MakeSpan(staging_), options_.clip_norm, &norm));
    if (norm > options_.clip_norm) ++clipped_;
  }
  if (keeps_updates()) {
    // Kept whole for Take; the next Stage stages into a fresh buffer.
    kept_.push_back(
        Kept{std::move(sender), std::move(staging_), staging_weight_, staging_factor_, metrics});
    staging_ = std::vector<float>();
    return absl::OkStatus();
  }
  // The gate checked every value and the weight, so the fold cannot fail.
  SEXTANT_RETURN_IF_ERROR(average_.AddDamped(staging_, staging_weight_, staging_factor_));
  AddMetrics(staging_weight_, metrics);
  return absl::OkStatus();
}

void RoundAccumulator::AddMetrics(double weight, const SenderMetrics& metrics) {
  sums_.train_loss += weight * metrics.train_loss;
  if (metrics.eval_weight > 0 && std::isfinite(metrics.eval_loss)) {
    sums_.eval_loss += metrics.eval_weight * metrics.eval_loss;
    sums_.eval_accuracy += metrics.eval_weight * metrics.eval_accuracy;
    eval_weight_ += metrics.eval_weight;
  }
}

absl::Status RoundAccumulator::FoldStagedFile() {
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

void RoundAccumulator::Reset() {
  average_.Reset();
  kept_.clear();
  count_ = 0;
  senders_ = 0;
  sums_ = SenderMetrics{};
  eval_weight_ = 0;
  total_weight_ = 0;
}

absl::StatusOr<RoundOutcome> RoundAccumulator::Take() {
  RoundOutcome out;
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
  out.metrics.train_loss = sums_.train_loss / out.total_weight;
  if (eval_weight_ > 0) {
    out.metrics.eval_loss = sums_.eval_loss / eval_weight_;
    out.metrics.eval_accuracy = sums_.eval_accuracy / eval_weight_;
    out.metrics.eval_weight = eval_weight_;
  }
  return out;
}

absl::StatusOr<int64_t> RoundAccumulator::TakeKept() {
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
absl::StatusOr<int64_t> RoundAccumulator::AggregateKept() {
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
