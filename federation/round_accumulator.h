#ifndef SEXTANT_FEDERATION_ROUND_ACCUMULATOR_H_
#define SEXTANT_FEDERATION_ROUND_ACCUMULATOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/staging_buffer.h"
#include "federation/weighted_average.h"

namespace sextant {

// How a round's accepted updates combine.
struct AggregationRule {
  enum class Kind { kWeightedMean, kMedian, kTrimmedMean, kKrum, kMultiKrum };
  Kind kind = Kind::kWeightedMean;  // Default: FedAvg's streaming weighted mean.
  double trim_fraction = 0.1;       // kTrimmedMean: cut at each end, in [0, 0.5). Default 0.1.
  int64_t byzantine = 1;            // kKrum, kMultiKrum: f >= 0. Default 1.
  int64_t selected = 0;             // kMultiKrum: m; 0 = n - f. Default 0.
  bool robust() const { return kind != Kind::kWeightedMean; }
};

// The rule named `name` (fedavg | median | trimmed_mean | krum | multi_krum) with its
// parameters. InvalidArgument for another name or a parameter out of range.
absl::StatusOr<AggregationRule> MakeAggregationRule(absl::string_view name, double trim_fraction,
                                                    int64_t byzantine, int64_t selected);

// Metrics a sender attaches to its update; folded as weighted means.
struct SenderMetrics {
  double train_loss = 0;     // weighted by the update's weight
  double eval_loss = 0;      // weighted by eval_weight
  double eval_accuracy = 0;  // weighted by eval_weight
  double eval_weight = 0;    // 0: no evaluation
};

// What a closed round produced. mean is the coordinator's own storage (valid until the next
// OpenRound).
struct RoundOutcome {
  int64_t round = 0;
  absl::Span<const float> mean;  // the weighted mean (or the robust rule's aggregate)
  double total_weight = 0;
  int64_t count = 0;      // clients behind the accepted updates
  int64_t senders = 0;    // accepted updates
  int64_t rejected = 0;   // updates turned away while this round was current
  SenderMetrics metrics;  // weighted means over the accepted senders
  int64_t excluded = 0;   // accepted updates a Krum rule left out of the aggregate
};

// The fields of RoundCoordinatorOptions that decide how updates are staged and combined; each
// means what it means there.
struct RoundAccumulatorOptions {
  size_t model_size = 0;    // floats per update. Required (> 0).
  AggregationRule rule;     // Default: the streaming weighted mean.
  int fold_threads = 0;     // Default 0: the machine's hardware threads, at most 4.
  double clip_norm = 0;     // L2 clip of every update, which then weighs 1. Default 0: off.
  std::string staging_dir;  // Default empty: updates are staged in memory.
  size_t file_staging_from = size_t{1} << 26;  // floats. Default 2^26.
  bool ordered = false;                        // fold at Take, in the senders' order. Default off.
};

// The update side of a round: stages one update at a time (in memory, or in an unlinked file
// for a large model) and folds each whole, accepted one into the round's aggregate: the
// streaming weighted mean, or, for a robust rule or an ordered fold, kept until Take. It
// decides nothing about who may send: its owner (RoundCoordinator) admits every update and
// checks every value (UpdateGate) before it gets here.
// Not thread-safe; its owner serialises calls.
class RoundAccumulator {
 public:
  explicit RoundAccumulator(RoundAccumulatorOptions options);
  RoundAccumulator(RoundAccumulator&&) = default;
  RoundAccumulator& operator=(RoundAccumulator&&) = default;

  // Starts staging sender's update of model_size floats standing for `count` clients, with
  // its declared weight (1 under clip_norm) and the staleness damping `factor`. Unavailable,
  // naming the folder, when the staging file cannot be made; nothing is staged then.
  absl::Status Stage(std::string sender, double weight, double factor, int64_t count);
  // The sender whose update is being staged; empty when none.
  const std::string& staging_owner() const { return staging_owner_; }
  // Stops staging the update without folding it (dropped, cut off, or its round closed).
  void Unstage() { staging_owner_.clear(); }
  // Stores values at `offset` of the staged update. InvalidArgument unless offset is the
  // number of floats staged so far and they fit the model; Unavailable when the staging file
  // cannot be written. The caller drops the update on either.
  absl::Status Write(size_t offset, absl::Span<const float> values);
  // OK when the staged update is whole; else InvalidArgument saying how much came.
  absl::Status CheckWhole() const;
  // Folds the whole staged update, with its sender's metrics, into the aggregate (or keeps it
  // for Take) and stops staging. Fails only when the staging file cannot be read back.
  absl::Status FoldStaged(const SenderMetrics& metrics);

  // Forgets the folded updates, their sums and counts (the update being staged stays).
  void Reset();
  // The aggregate of what was folded since Reset: mean, total_weight, count, senders, metrics
  // and excluded are set; round and rejected are the caller's. The mean is this object's
  // storage, valid until the next Reset or fold. Errors of a robust rule's aggregation.
  absl::StatusOr<RoundOutcome> Take();
  // The last Take's mean will not be read again: its memory goes back to the system until
  // the next fold (WeightedAverage::Release).
  void Release() { average_.Release(); }

  int64_t count() const { return count_; }      // clients behind the folded updates
  int64_t senders() const { return senders_; }  // folded updates
  // Updates that clip_norm scaled down so far (over all Resets).
  int64_t clipped() const { return clipped_; }
  // The staging buffer's capacity in floats (0 until the first update, and with a staging
  // file), for memory checks.
  size_t staging_capacity() const { return staging_.capacity(); }
  bool stages_in_file() const {
    return !options_.staging_dir.empty() && options_.model_size >= options_.file_staging_from;
  }

 private:
  // An accepted update kept for Take (a robust rule, or options.ordered).
  struct Kept {
    std::string sender;
    std::vector<float> values;
    double weight;
    double factor;  // staleness damping (buffered)
    SenderMetrics metrics;
  };
  bool keeps_updates() const { return options_.rule.robust() || options_.ordered; }
  // Adds one accepted update's metrics to the weighted sums.
  void AddMetrics(double weight, const SenderMetrics& metrics);
  // FoldStaged's fold from the staging file: clipped (clip_norm) in a first pass over it.
  absl::Status FoldStagedFile();
  // Sorts kept_ by sender and takes it in: folded into the mean in that order (ordered), or
  // combined by the robust rule into robust_out_. Returns the updates a Krum rule left out.
  absl::StatusOr<int64_t> TakeKept();
  // Writes the robust rule's aggregate of kept_ to robust_out_; returns the updates left out.
  absl::StatusOr<int64_t> AggregateKept();

  RoundAccumulatorOptions options_;
  WeightedAverage average_;
  // The update being received: its sender, weight, count and the floats so far.
  std::string staging_owner_;
  double staging_weight_ = 0;
  int64_t staging_count_ = 0;
  size_t staged_ = 0;
  double staging_factor_ = 1;  // buffered: the staleness damping of the update being received
  std::vector<float> staging_;
  StagingBuffer staging_file_;  // stages_in_file(): an unlinked file made by the first Stage
  std::vector<float> file_chunk_;
  int64_t count_ = 0;
  int64_t senders_ = 0;
  int64_t clipped_ = 0;
  SenderMetrics sums_;  // weighted sums, divided at Take
  double eval_weight_ = 0;
  // Robust rules and ordered folds: every accepted update since Reset, and a robust rule's
  // aggregate.
  std::vector<Kept> kept_;
  std::vector<float> robust_out_;
  double total_weight_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_ROUND_ACCUMULATOR_H_
