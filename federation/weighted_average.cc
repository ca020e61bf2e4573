#include "federation/weighted_average.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

// The kernels are memory-bound; an AVX2 clone is picked at load time where the CPU has it so
// that the conversions and multiplies keep up with memory. Both clones do the same operations
// in the same order (no FMA contraction in ISO C++ mode), so results do not depend on the CPU.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SEXTANT_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define SEXTANT_KERNEL
#endif

// True when no value is NaN or Inf. Works on the bits so that the loop vectorises without
// -ffast-math: an all-ones exponent plus one carries into the sign bit.
SEXTANT_KERNEL bool AllFinite(const float* u, size_t n) {
  uint32_t carry = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, u + i, sizeof bits);
    carry |= (bits & 0x7f800000u) + 0x00800000u;
  }
  return (carry & 0x80000000u) == 0;
}

size_t FirstNonFinite(const float* u, size_t n) {
  size_t i = 0;
  while (i < n && std::isfinite(u[i])) ++i;
  return i;
}

// s = keep * acc + sum_j c_j u_j over one block; acc == nullptr means the mean is still zero.
SEXTANT_KERNEL void StartFour(double* __restrict s, size_t n, const float* __restrict acc,
                              double keep, const float* __restrict u0,
                              const float* __restrict u1, const float* __restrict u2,
                              const float* __restrict u3, double c0, double c1, double c2,
                              double c3) {
  if (acc == nullptr) {
    for (size_t i = 0; i < n; ++i) s[i] = (c0 * u0[i] + c1 * u1[i]) + (c2 * u2[i] + c3 * u3[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    s[i] = keep * acc[i] + ((c0 * u0[i] + c1 * u1[i]) + (c2 * u2[i] + c3 * u3[i]));
  }
}

SEXTANT_KERNEL void AddFour(double* __restrict s, size_t n, const float* __restrict u0,
                            const float* __restrict u1, const float* __restrict u2,
                            const float* __restrict u3, double c0, double c1, double c2,
                            double c3) {
  for (size_t i = 0; i < n; ++i) s[i] += (c0 * u0[i] + c1 * u1[i]) + (c2 * u2[i] + c3 * u3[i]);
}

// out = keep * acc + c * u for a fold of a single vector (acc == nullptr: the mean is zero).
SEXTANT_KERNEL void FoldOne(float* out, size_t n, const float* acc, double keep,
                            const float* __restrict u, double c) {
  if (acc == nullptr) {
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(c * u[i]);
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(keep * acc[i] + c * u[i]);
}

SEXTANT_KERNEL void Store(float* __restrict acc, const double* __restrict s, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] = static_cast<float>(s[i]);
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

WeightedAverage::WeightedAverage(size_t d) : mean_(d, 0.0f), partial_(kBlock) {}

absl::Status WeightedAverage::Add(absl::Span<const float> update, double weight) {
  const absl::Span<const float> one[] = {update};
  const double w[] = {weight};
  return AddBatch(one, w)[0];
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
    return absl::InvalidArgumentError(absl::StrCat(
        "weighted sum has a non-finite value at ",
        FirstNonFinite(weighted_sum.data(), weighted_sum.size())));
  }
  Fold({{weighted_sum.data(), 1.0, total_weight, 0, count}}, statuses);
  return statuses[0];
}

// Long because validation, the correction of an update found bad part-way and the block loop
// share the running total; split up they would pass it back and forth.
void WeightedAverage::Fold(std::vector<Item> items, std::vector<absl::Status>& statuses) {
  if (items.empty()) return;
  const double old_total = total_weight_;
  double total = old_total;
  for (const Item& item : items) total += item.weight;
  const size_t d = mean_.size();
  for (size_t b = 0; b < d && !items.empty(); b += kBlock) {
    const size_t len = std::min(kBlock, d - b);
    // A block is folded group by group, each group checked just before it is folded (so its
    // values are in cache once). A bad value restarts the block: nothing of it is stored yet.
    while (!items.empty()) {
      const size_t bad = FoldBlock(b, len, items, old_total / total, total);
      if (bad == items.size()) break;
      const float* u = items[bad].data + b;
      statuses[items[bad].index] = absl::InvalidArgumentError(
          absl::StrCat("update has a non-finite value at ", b + FirstNonFinite(u, len)));
      const double new_total = total - items[bad].weight;
      if (new_total > 0) Unfold(b, items[bad], total, new_total);
      total = new_total;
      items.erase(items.begin() + static_cast<std::ptrdiff_t>(bad));
    }
  }
  if (items.empty()) {
    dirty_ = dirty_ || old_total == 0;  // blocks written before the last item failed are stale
    return;
  }
  dirty_ = false;
  total_weight_ = total;
  for (const Item& item : items) count_ += item.count;
}

size_t WeightedAverage::FoldBlock(size_t begin, size_t len, const std::vector<Item>& items,
                                  double keep, double total) {
  double* s = partial_.data();
  const float* acc = keep == 0 ? nullptr : mean_.data() + begin;
  for (size_t k = 0; k < items.size(); k += 4) {
    for (size_t j = k; j < std::min(k + 4, items.size()); ++j) {
      if (!AllFinite(items[j].data + begin, len)) return j;
    }
    if (items.size() == 1) {
      FoldOne(mean_.data() + begin, len, acc, keep, items[0].data + begin,
              items[0].numerator / total);
      return items.size();
    }
    // A short last group repeats its first vector with coefficient 0 (already in cache).
    const float* p[4];
    double c[4];
    for (size_t j = 0; j < 4; ++j) {
      const bool real = k + j < items.size();
      p[j] = (real ? items[k + j].data : items[k].data) + begin;
      c[j] = real ? items[k + j].numerator / total : 0.0;
    }
    if (k == 0) {
      StartFour(s, len, acc, keep, p[0], p[1], p[2], p[3], c[0], c[1], c[2], c[3]);
    } else {
      AddFour(s, len, p[0], p[1], p[2], p[3], c[0], c[1], c[2], c[3]);
    }
  }
  Store(mean_.data() + begin, s, len);
  return items.size();
}

void WeightedAverage::Unfold(size_t end, const Item& bad, double old_total, double new_total) {
  for (size_t i = 0; i < end; ++i) {
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

void WeightedAverage::MaterialiseZeros() const {
  if (!dirty_) return;
  std::fill(mean_.begin(), mean_.end(), 0.0f);
  dirty_ = false;
}

}  // namespace sextant
