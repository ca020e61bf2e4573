#ifndef SEXTANT_FEDERATION_WEIGHTED_AVERAGE_H_
#define SEXTANT_FEDERATION_WEIGHTED_AVERAGE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace boost::asio {
class thread_pool;
}  // namespace boost::asio

namespace sextant {

// A streaming weighted mean over float vectors: FedAvg's combine step, weighted by example
// counts. Memory is O(d) whatever the number of clients: each update is folded in as it arrives
// and can be dropped afterwards, and the object always holds the mean so far (mean()), so that
// no final pass over the model is needed.
//
// Numerics. The state is one float per coordinate, the current mean. A fold of k updates
// (one Add, one AddBatch or one AddWeightedSum call) computes, per coordinate and in double,
//     mean' = mean * (W / W') + sum_i (w_i / W') u_i        (W' = W + sum_i w_i)
// and rounds once to float. The rescaling shrinks earlier rounding errors, so after B folds of
// n updates in all, against the exact mean m = sum(w_i u_i) / sum(w_i):
//     |mean - m| <= (B * 2^-24 + (2n + 4B + 2) * 2^-53) * sum(w_i |u_i|) / sum(w_i).
// With every update of a round in one AddBatch (B = 1) that is a single float rounding. A double
// accumulator would make the bound independent of B, but it doubles the accumulator's memory
// and its traffic; folding a batch costs one read and one write of 4 bytes per coordinate
// besides the updates themselves.
//
// Hierarchy. A regional aggregator forwards mean() and total_weight(); the global aggregator
// folds each region in with Add(region_mean, region_total_weight), or a secure-aggregation sum
// with AddWeightedSum(). The global mean is then the flat mean over all clients, within the bound
// above with B counting the region folds (and exactly when every partial mean is representable,
// e.g. dyadic values with power-of-two totals).
//
// Not thread-safe.
class WeightedAverage {
 public:
  // d is the vector length. A fold of a long vector is split into contiguous coordinate ranges
  // folded on up to `threads` threads (the caller's plus threads - 1 started per fold), so that
  // it can use more than one core's memory bandwidth; every coordinate is computed the same way
  // whatever the split, so the mean does not depend on `threads`. threads < 1 counts as 1.
  // The threads - 1 helpers are started here and kept until destruction.
  explicit WeightedAverage(size_t d, int threads = 1);
  ~WeightedAverage();
  WeightedAverage(WeightedAverage&&) noexcept;
  WeightedAverage& operator=(WeightedAverage&&) noexcept;

  // Folds in one update with weight `weight` (e.g. its example count). Returns InvalidArgument
  // for a wrong length, a weight that is not finite and > 0, or an update holding NaN or Inf;
  // the update is then left out (see AddBatch).
  absl::Status Add(absl::Span<const float> update, double weight);

  // Folds in one update whose contribution is damped by `factor` in (0, 1] while its full
  // weight counts in the total: the mean becomes sum(f_i w_i u_i) / sum(w_i). Buffered
  // asynchronous FedAvg (FedBuff) damps a stale update this way, so that a buffer of stale
  // updates moves the model less than a fresh one. Errors as Add, and for a factor outside
  // (0, 1].
  absl::Status AddDamped(absl::Span<const float> update, double weight, double factor);

  // Folds one update a range of coordinates at a time, for an update staged outside memory (a
  // file): each AddDampedRange folds coordinates [offset, offset + values.size()) exactly as
  // AddDamped(update, weight, factor) folds them, and EndRanges(weight) then counts the update
  // in the total. Every coordinate must be folded once, with the same weight and factor, before
  // EndRanges, and the mean is not read in between. InvalidArgument for a range past the end, a
  // bad weight or factor, or a NaN/Inf value: that range is then as it was, and the caller must
  // not go on with the update (check values before the first range, as RoundCoordinator does).
  absl::Status AddDampedRange(size_t offset, absl::Span<const float> values, double weight,
                              double factor);
  void EndRanges(double weight);

  // Folds several updates at once (updates[i] with weight weights[i]): one pass over the mean and
  // one rounding for the whole batch, so it is faster and more accurate than repeated Add.
  // Returns one status per update, in order; an update with a wrong length, a bad weight or a
  // NaN/Inf value gets InvalidArgument and is left out while the others are folded. Values are
  // checked block by block as they are folded, so the updates are read from memory once; when a
  // bad value is found past the first block, the blocks already written are corrected, which
  // adds one more float rounding in those coordinates, of a value that still included the
  // dropped update: at most 2^-24 (sum(w_i |u_i|) + w_bad |u_bad|) / sum(w_i).
  // When weights.size() != updates.size(), every entry is InvalidArgument and nothing is folded.
  std::vector<absl::Status> AddBatch(absl::Span<const absl::Span<const float>> updates,
                                     absl::Span<const double> weights);

  // Folds in a weighted sum (sum_i w_i u_i over `count` updates whose weights total
  // total_weight), as secure aggregation yields it. InvalidArgument for a wrong length, a NaN/Inf
  // value, a total weight that is not finite and > 0, or count < 1; nothing is folded then.
  absl::Status AddWeightedSum(absl::Span<const float> weighted_sum, double total_weight,
                              int64_t count);

  // Copies the mean into out (out.size() == d). FailedPrecondition when nothing was folded;
  // InvalidArgument for a wrong length.
  absl::Status Mean(absl::Span<float> out) const;

  // The mean so far, in place (no copy). All zeros when nothing was folded.
  absl::Span<const float> mean() const;

  // Forgets every update (for the next round) without releasing memory.
  void Reset();
  // Forgets every update, as Reset, and gives the mean's memory back to the system until the
  // next fold writes it again (ReleasePages): for a caller done with a large mean, which must
  // not read it (mean(), Mean()) before folding again.
  void Release();

  size_t size() const { return mean_.size(); }
  double total_weight() const { return total_weight_; }
  int64_t count() const { return count_; }

  // Coordinates per block of a fold: the block's double partial sums (128 KiB) stay in L2
  // while every update of the batch is folded into them, and each update is read in runs of
  // 64 KiB, long enough for the hardware prefetchers to keep many updates streaming at once.
  static constexpr size_t kBlock = 16384;
  // Each thread of a fold takes at least this many blocks (1 MiB of floats), so that a short
  // vector is not split at a cost above the time it saves.
  static constexpr size_t kMinBlocksPerPart = 16;
  // From this many coordinates on (2 MiB of mean), the mean is stored with streaming stores,
  // which skip reading each line before it is overwritten.
  static constexpr size_t kStreamFrom = size_t{1} << 19;

 private:
  // One vector to fold: coefficient numerator / W' multiplies data (weight for an update, 1 for a
  // weighted sum); weight is what it adds to the total.
  struct Item {
    const float* data;
    double numerator;
    double weight;
    size_t index;   // into the caller's statuses
    int64_t count;  // updates it stands for
  };
  // What one thread's fold of coordinates [begin, end) did.
  struct Part {
    size_t begin, end;
    std::vector<size_t> kept;                             // items folded into the range
    std::vector<std::pair<size_t, std::string>> dropped;  // items with a NaN/Inf in it
    double total;                                         // total weight behind the range
  };
  void Fold(std::vector<Item> items, std::vector<absl::Status>& statuses);
  // Folds [begin, end) of every item, block by block, with `partial` (kBlock doubles) as the
  // block's scratch; an item found bad is taken back out of the blocks already written.
  Part FoldRange(size_t begin, size_t end, const std::vector<Item>& items, double* partial,
                 double old_total);
  // Folds one block of every item into s, then stores it. Returns items.size(), or the index of
  // an item with a NaN/Inf in this block (nothing then stored).
  size_t FoldBlock(size_t begin, size_t len, const std::vector<Item>& items, double* s, double keep,
                   double total);
  // Takes `bad` back out of coordinates [begin, end) of the mean.
  void Unfold(size_t begin, size_t end, const Item& bad, double old_total, double new_total);
  void MaterialiseZeros() const;

  // Reset defers the zeroing to the next fold (dirty_: mean_ holds stale values that are
  // logically zero), so that a round costs one pass over the mean, not two.
  mutable std::vector<float> mean_;
  mutable bool dirty_ = false;
  std::vector<std::vector<double>> partials_;          // per thread, kBlock doubles: its block
  std::unique_ptr<boost::asio::thread_pool> helpers_;  // threads - 1; null for one thread
  double total_weight_ = 0;
  int64_t count_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_FEDERATION_WEIGHTED_AVERAGE_H_
