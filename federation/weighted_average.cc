#include "federation/weighted_average.h"

#include "common/mapped_floats.h"
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <latch>
#include <limits>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "absl/strings/str_cat.h"
#include "common/mapped_floats.h"
#include "federation/internal/fold_kernels.h"

namespace sextant {
namespace {

// The kernels are memory-bound; an AVX2 clone is picked at load time where the CPU has it so
// that the conversions and multiplies keep up with memory. Both clones do the same operations
// in the same order (the library is built with -ffp-contract=off: no multiply is fused with an
// add where the instruction set has FMA), so results do not depend on the CPU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SEXTANT_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define SEXTANT_KERNEL
#endif

// True when no value is NaN or Inf. Works on the bits (Bits: the unsigned integer of T's size)
// so that the loop vectorises without -ffast-math: an all-ones exponent plus one carries into
// the sign bit. Inlined into each kernel clone below.
template <typename T, typename Bits>
[[gnu::always_inline]] inline bool AllFiniteBits(const T* v, size_t n) {
  constexpr Bits kSign = Bits{1} << (8 * sizeof(Bits) - 1);
  constexpr Bits kLowestExponentBit = Bits{1} << (std::numeric_limits<T>::digits - 1);
  constexpr Bits kExponent = kSign - kLowestExponentBit;
  Bits carry = 0;
  for (size_t i = 0; i < n; ++i) {
    Bits bits;
    std::memcpy(&bits, v + i, sizeof bits);
    carry |= (bits & kExponent) + kLowestExponentBit;
  }
  return (carry & kSign) == 0;
}

SEXTANT_KERNEL bool AllFinite(const float* u, size_t n) {
  return AllFiniteBits<float, uint32_t>(u, n);
}

SEXTANT_KERNEL bool AllFiniteDouble(const double* s, size_t n) {
  return AllFiniteBits<double, uint64_t>(s, n);
}

size_t FirstNonFinite(const float* u, size_t n) {
  size_t i = 0;
  while (i < n && std::isfinite(u[i])) ++i;
  return i;
}

using internal::FoldKernel;
constexpr size_t kMaxGroup = internal::kMaxFoldGroup;

// The kernel for a group of `width` updates, for this CPU.
FoldKernel FoldKernelFor(size_t width) {
  static const internal::FoldIsa isa = internal::BestFoldIsa();
  return internal::FoldKernelFor(width, isa);
}

SEXTANT_KERNEL void Store(float* __restrict acc, const double* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = static_cast<float>(s[i]);
}

// Store through the write-combining buffers, for a mean far larger than the caches: the lines
// are not read before they are overwritten. The same rounding as Store. The caller fences.
void StoreStreaming(float* __restrict acc, const double* __restrict s, size_t n) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i < n && reinterpret_cast<uintptr_t>(acc + i) % 16 != 0; ++i) {
    acc[i] = static_cast<float>(s[i]);
  }
  for (; i + 4 <= n; i += 4) {
    const __m128 lo = _mm_cvtpd_ps(_mm_loadu_pd(s + i));
    const __m128 hi = _mm_cvtpd_ps(_mm_loadu_pd(s + i + 2));
    _mm_stream_ps(acc + i, _mm_movelh_ps(lo, hi));
  }
  for (; i < n; ++i) acc[i] = static_cast<float>(s[i]);
#else
  Store(acc, s, n);
#endif
}

void StoreFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

absl::Status CheckWeight(double weight) {
  if (std::isfinite(weight) && weight > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("weight must be finite and > 0, got ", weight));
}

absl::Status CheckLength(size_t got, size_t want) {
  if (got == want) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("update has ", got, " values, expected ", want));
}

}  // namespace

WeightedAverage::WeightedAverage(size_t d, int threads)
    : mean_(d, 0.0f),
      partials_(static_cast<size_t>(std::max(threads, 1)), std::vector<double>(kBlock)) {
  if (threads > 1) {
    helpers_ = std::make_unique<boost::asio::thread_pool>(static_cast<size_t>(threads - 1));
  }
  // Resident only from the first fold on: a tier whose mean waits for its first round (or
  // never folds, under secure aggregation) does not hold a large model's worth of zeros.
  Release();
}

WeightedAverage::~WeightedAverage() = default;
WeightedAverage::WeightedAverage(WeightedAverage&&) noexcept = default;
WeightedAverage& WeightedAverage::operator=(WeightedAverage&&) noexcept = default;

absl::Status WeightedAverage::Add(absl::Span<const float> update, double weight) {
  const absl::Span<const float> one[] = {update};
  const double w[] = {weight};
  return AddBatch(one, w)[0];
}

absl::Status WeightedAverage::AddDamped(absl::Span<const float> update, double weight,
                                        double factor) {
  if (!(factor > 0 && factor <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("damping factor must be in (0, 1], got ", factor));
  }
  if (absl::Status s = CheckLength(update.size(), mean_.size()); !s.ok()) return s;
  if (absl::Status s = CheckWeight(weight); !s.ok()) return s;
  std::vector<absl::Status> statuses(1);
  Fold({{update.data(), weight * factor, weight, 0, 1}}, statuses);
  return statuses[0];
}

absl::Status WeightedAverage::AddDampedRange(size_t offset, absl::Span<const float> values,
                                             double weight, double factor) {
  if (!(factor > 0 && factor <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("damping factor must be in (0, 1], got ", factor));
  }
  if (offset > mean_.size() || values.size() > mean_.size() - offset) {
    return absl::InvalidArgumentError(absl::StrCat("range [", offset, ", ", offset + values.size(),
                                                   ") past the mean's ", mean_.size()));
  }
  if (absl::Status s = CheckWeight(weight); !s.ok()) return s;
  if (values.empty()) return absl::OkStatus();
  // Items address coordinates absolutely: data + i is coordinate i of the update.
  const std::vector<Item> items = {{values.data() - offset, weight * factor, weight, 0, 1}};
  const Part part =
      FoldRange(offset, offset + values.size(), items, partials_[0].data(), total_weight_);
  if (!part.dropped.empty()) return absl::InvalidArgumentError(part.dropped[0].second);
  return absl::OkStatus();
}

void WeightedAverage::EndRanges(double weight) {
  dirty_ = false;
  total_weight_ += weight;
  ++count_;
}

std::vector<absl::Status> WeightedAverage::AddBatch(
    absl::Span<const absl::Span<const float>> updates, absl::Span<const double> weights) {
  std::vector<absl::Status> statuses(updates.size());
  if (weights.size() != updates.size()) {
    for (auto& s : statuses) {
      s = absl::InvalidArgumentError(
          absl::StrCat(updates.size(), " updates but ", weights.size(), " weights"));
    }
    return statuses;
  }
  std::vector<Item> items;
  for (size_t c = 0; c < updates.size(); ++c) {
    statuses[c] = CheckLength(updates[c].size(), mean_.size());
    if (statuses[c].ok()) statuses[c] = CheckWeight(weights[c]);
    if (statuses[c].ok()) items.push_back({updates[c].data(), weights[c], weights[c], c, 1});
  }
  Fold(std::move(items), statuses);
  return statuses;
}

absl::Status WeightedAverage::AddWeightedSum(absl::Span<const float> weighted_sum,
                                             double total_weight, int64_t count) {
  if (absl::Status s = CheckLength(weighted_sum.size(), mean_.size()); !s.ok()) return s;
  if (absl::Status s = CheckWeight(total_weight); !s.ok()) return s;
  if (count < 1) return absl::InvalidArgumentError(absl::StrCat("count must be >= 1, got ", count));
  std::vector<absl::Status> statuses(1);
  if (!AllFinite(weighted_sum.data(), weighted_sum.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("weighted sum has a non-finite value at ",
                     FirstNonFinite(weighted_sum.data(), weighted_sum.size())));
  }
  Fold({{weighted_sum.data(), 1.0, total_weight, 0, count}}, statuses);
  return statuses[0];
}

void WeightedAverage::Fold(std::vector<Item> items, std::vector<absl::Status>& statuses) {
  if (items.empty()) return;
  const double old_total = total_weight_;
  const size_t d = mean_.size();
  // Contiguous ranges of whole blocks, one per thread, each at least kMinBlocksPerPart blocks.
  const size_t blocks = (d + kBlock - 1) / kBlock;
  const size_t parts = std::max<size_t>(1, std::min(partials_.size(), blocks / kMinBlocksPerPart));
  std::vector<Part> results(parts);
  auto run = [&](size_t r) {
    const size_t begin = std::min(d, blocks * r / parts * kBlock);
    const size_t end = std::min(d, blocks * (r + 1) / parts * kBlock);
    results[r] = FoldRange(begin, end, items, partials_[r].data(), old_total);
  };
  std::latch helped(static_cast<std::ptrdiff_t>(parts - 1));
  for (size_t r = 1; r < parts; ++r) {
    boost::asio::post(*helpers_, [&run, &helped, r] {
      run(r);
      helped.count_down();
    });
  }
  run(0);
  helped.wait();

  // An item that was bad in some range is left out everywhere: the ranges that kept it take it
  // back out. The first range's message names the lowest bad coordinate.
  std::vector<bool> bad(items.size(), false);
  for (const Part& part : results) {
    for (const auto& [i, message] : part.dropped) {
      if (!bad[i]) statuses[items[i].index] = absl::InvalidArgumentError(message);
      bad[i] = true;
    }
  }
  double total = old_total;
  bool any_kept = false;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!bad[i]) total += items[i].weight;
    any_kept = any_kept || !bad[i];
  }
  for (size_t r = 0; r < parts; ++r) {
    double part_total = results[r].total;
    for (size_t i : results[r].kept) {
      if (!bad[i]) continue;
      const double new_total = part_total - items[i].weight;
      if (new_total > 0) Unfold(results[r].begin, results[r].end, items[i], part_total, new_total);
      part_total = new_total;
    }
  }
  if (!any_kept) {
    dirty_ = dirty_ || old_total == 0;  // blocks written before the last item failed are stale
    return;
  }
  dirty_ = false;
  total_weight_ = total;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!bad[i]) count_ += items[i].count;
  }
}

// Long because validation, the correction of an update found bad part-way and the block loop
// share the running total; split up they would pass it back and forth.
WeightedAverage::Part WeightedAverage::FoldRange(size_t begin, size_t end,
                                                 const std::vector<Item>& all, double* partial,
                                                 double old_total) {
  Part part{begin, end, {}, {}, old_total};
  std::vector<Item> items = all;
  std::vector<size_t> ids(all.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  double total = old_total;
  for (const Item& item : items) total += item.weight;
  for (size_t b = begin; b < end && !items.empty(); b += kBlock) {
    const size_t len = std::min(kBlock, end - b);
    // A bad value restarts the block: nothing of it is stored yet.
    while (!items.empty()) {
      const size_t bad = FoldBlock(b, len, items, partial, old_total / total, total);
      if (bad == items.size()) break;
      const float* u = items[bad].data + b;
      part.dropped.emplace_back(
          ids[bad], absl::StrCat("update has a non-finite value at ", b + FirstNonFinite(u, len)));
      const double new_total = total - items[bad].weight;
      if (new_total > 0) Unfold(begin, b, items[bad], total, new_total);
      total = new_total;
      items.erase(items.begin() + static_cast<std::ptrdiff_t>(bad));
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(bad));
    }
  }
  StoreFence();
  part.kept = std::move(ids);
  part.total = total;
  return part;
}

size_t WeightedAverage::FoldBlock(size_t begin, size_t len, const std::vector<Item>& items,
                                  double* s, double keep, double total) {
  const float* acc = keep == 0 ? nullptr : mean_.data() + begin;
  // Groups of eight, each one pass over s; what is left at the end, up to kMaxGroup, goes in one
  // group, so that a round of ten updates is a single pass. Updates are read many at a time:
  // fewer streams in flight read memory more slowly (bench/aggregation).
  const float* p[kMaxGroup];
  double c[kMaxGroup];
  for (size_t k = 0; k < items.size();) {
    const size_t rest = items.size() - k;
    const size_t width = rest > kMaxGroup ? 8 : rest;
    for (size_t j = 0; j < width; ++j) {
      p[j] = items[k + j].data + begin;
      c[j] = items[k + j].numerator / total;
    }
    FoldKernelFor(width)(s, len, k == 0, acc, keep, p, c);
    k += width;
  }
  // Every coefficient is finite and at most 1 and the mean is finite, so a partial sum is NaN or
  // Inf exactly when some update holds one there (0 * Inf is NaN too): one check of the block's
  // sums, in cache, stands for a check of every update.
  if (!AllFiniteDouble(s, len)) {
    for (size_t j = 0; j < items.size(); ++j) {
      if (!AllFinite(items[j].data + begin, len)) return j;
    }
  }
  if (mean_.size() >= kStreamFrom) {
    StoreStreaming(mean_.data() + begin, s, len);
  } else {
    Store(mean_.data() + begin, s, len);
  }
  return items.size();
}

void WeightedAverage::Unfold(size_t begin, size_t end, const Item& bad, double old_total,
                             double new_total) {
  for (size_t i = begin; i < end; ++i) {
    const double sum = static_cast<double>(mean_[i]) * old_total - bad.numerator * bad.data[i];
    mean_[i] = static_cast<float>(sum / new_total);
  }
}

absl::Status WeightedAverage::Mean(absl::Span<float> out) const {
  if (count_ == 0) return absl::FailedPreconditionError("no updates were added");
  if (out.size() != mean_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("output has ", out.size(), " values, expected ", mean_.size()));
  }
  std::copy(mean_.begin(), mean_.end(), out.begin());
  return absl::OkStatus();
}

absl::Span<const float> WeightedAverage::mean() const {
  MaterialiseZeros();
  return mean_;
}

void WeightedAverage::Reset() {
  dirty_ = true;
  total_weight_ = 0;
  count_ = 0;
}

void WeightedAverage::Release() {
  Reset();
  ReleasePages(mean_.data(), mean_.size() * sizeof(float));
}

void WeightedAverage::MaterialiseZeros() const {
  if (!dirty_) return;
  std::fill(mean_.begin(), mean_.end(), 0.0f);
  dirty_ = false;
}

}  // namespace sextant
