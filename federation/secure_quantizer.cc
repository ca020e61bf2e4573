#include "federation/secure_quantizer.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "federation/update_codec.h"

namespace sextant {
namespace {
using U128 = unsigned __int128;
uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t RingMask(int bits) { return bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }
}  // namespace

int SecureQuantizer::RequiredRingBits(int bits, int64_t max_clients, int64_t max_weight) {
  const U128 levels = (U128{1} << (bits - 1)) - 1;
  const U128 bound = 2 * levels * static_cast<U128>(max_clients) * static_cast<U128>(max_weight);
  for (int k = 1; k <= 64; ++k) {
    if (bound < (U128{1} << k)) return k;
  }
  return 65;
}

SecureQuantizer::SecureQuantizer(const SecureQuantizerOptions& options, int ring_bits)
    : options_(options), ring_bits_(ring_bits), levels_((int64_t{1} << (options.bits - 1)) - 1) {}

absl::StatusOr<SecureQuantizer> SecureQuantizer::Create(const SecureQuantizerOptions& o) {
  if (!(std::isfinite(o.clip) && o.clip > 0)) {
    return absl::InvalidArgumentError("secure quantizer: clip must be finite and > 0");
  }
  if (o.bits < 2 || o.bits > 32) {
    return absl::InvalidArgumentError("secure quantizer: bits must be in 2..32");
  }
  if (o.max_weight < 1 || o.max_clients < 1 || o.max_weight > (int64_t{1} << 40) ||
      o.max_clients > (int64_t{1} << 40)) {
    return absl::InvalidArgumentError(
        "secure quantizer: max_weight and max_clients must be in 1..2^40");
  }
  const int need = RequiredRingBits(o.bits, o.max_clients, o.max_weight);
  if (need > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("secure quantizer: ", o.max_clients, " clients x weight ", o.max_weight,
                     " at ", o.bits, " bits need a ring over 64 bits; lower bits or max_weight"));
  }
  if (o.segments.size() != o.segment_clips.size() ||
      static_cast<int64_t>(o.segments.size()) > kMaxUpdateSegments) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secure quantizer: ", o.segments.size(), " segments and ", o.segment_clips.size(),
        " segment clips; they must match, at most ", kMaxUpdateSegments));
  }
  for (size_t i = 0; i < o.segments.size(); ++i) {
    if (o.segments[i] < 0 || !(std::isfinite(o.segment_clips[i]) && o.segment_clips[i] > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "secure quantizer: segment ", i, " has ", o.segments[i], " elements and clip ",
          o.segment_clips[i], "; counts must be >= 0 and clips finite and > 0"));
    }
  }
  const int k = o.ring_bits == 0 ? need : o.ring_bits;
  if (k < need || k > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secure quantizer: a ring of ", o.ring_bits, " bits can overflow: ", o.max_clients,
        " clients x weight ", o.max_weight, " at ", o.bits, " bits need at least ", need));
  }
  return SecureQuantizer(o, k);
}

absl::Status SecureQuantizer::Encode(absl::Span<const float> x, int64_t weight, uint64_t seed,
                                     absl::Span<uint64_t> out) const {
  if (out.size() != x.size() + 1) {
    return absl::InvalidArgumentError("secure quantizer: out must hold x.size() + 1 elements");
  }
  if (weight < 1 || weight > options_.max_weight) {
    return absl::InvalidArgumentError(absl::StrCat("secure quantizer: weight ", weight,
                                                   " outside [1, ", options_.max_weight, "]"));
  }
  absl::StatusOr<std::vector<std::pair<size_t, double>>> ranges = Ranges(x.size());
  if (!ranges.ok()) return ranges.status();
  if (absl::Status s = EncodeRange(x, weight, seed, 0, *ranges, out.first(x.size())); !s.ok()) {
    return s;
  }
  out[x.size()] = static_cast<uint64_t>(weight) & RingMask(ring_bits_);
  return absl::OkStatus();
}

absl::StatusOr<RingVector> SecureQuantizer::Encode(absl::Span<const float> x, int64_t weight,
                                                   uint64_t seed) const {
  if (weight < 1 || weight > options_.max_weight) {
    return absl::InvalidArgumentError(absl::StrCat("secure quantizer: weight ", weight,
                                                   " outside [1, ", options_.max_weight, "]"));
  }
  absl::StatusOr<std::vector<std::pair<size_t, double>>> ranges = Ranges(x.size());
  if (!ranges.ok()) return ranges.status();
  RingVector out(ring_bits_, x.size() + 1);
  std::vector<uint64_t> block(std::min(x.size() + 1, size_t{1} << 16));
  for (size_t at = 0; at < x.size(); at += block.size()) {
    const absl::Span<uint64_t> part =
        absl::MakeSpan(block).first(std::min(block.size(), x.size() - at));
    if (absl::Status s = EncodeRange(x, weight, seed, at, *ranges, part); !s.ok()) return s;
    out.Write(at, part);
  }
  const uint64_t w = static_cast<uint64_t>(weight) & RingMask(ring_bits_);
  out.Write(x.size(), absl::MakeConstSpan(&w, 1));
  return out;
}

absl::Status SecureQuantizer::EncodeRange(absl::Span<const float> x, int64_t weight, uint64_t seed,
                                          size_t begin,
                                          const std::vector<std::pair<size_t, double>>& ranges,
                                          absl::Span<uint64_t> out) const {
  const double lmax = static_cast<double>(levels_);
  const uint64_t ring = RingMask(ring_bits_);
  uint64_t state = seed + begin * 0x9E3779B97F4A7C15ull;  // SplitMix64's state before element begin
  size_t range = 0;
  for (size_t j = 0; j < out.size(); ++j) {
    const size_t i = begin + j;
    if (std::isnan(x[i])) return absl::InvalidArgumentError("secure quantizer: NaN in update");
    while (i >= ranges[range].first) ++range;
    const double scale = lmax / ranges[range].second;
    const double v = std::clamp(static_cast<double>(x[i]) * scale, -lmax, lmax);
    const double lo = std::floor(v);
    const double u = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;
    const int64_t q = static_cast<int64_t>(lo) + (u < v - lo ? 1 : 0);
    out[j] = static_cast<uint64_t>(q * weight) & ring;
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SecureQuantizer::DecodeMean(absl::Span<const uint64_t> sum,
                                                    absl::Span<float> mean) const {
  if (sum.size() != mean.size() + 1) {
    return absl::InvalidArgumentError("secure quantizer: sum must hold mean.size() + 1 elements");
  }
  auto read = [&](size_t at, absl::Span<uint64_t> out) {
    std::copy_n(sum.begin() + at, out.size(), out.begin());
  };
  return Decode(sum[mean.size()], mean, read, nullptr);
}

absl::StatusOr<int64_t> SecureQuantizer::DecodeMean(const RingVector& sum,
                                                    absl::Span<float> mean) const {
  if (absl::Status s = CheckSum(sum, mean.size()); !s.ok()) return s;
  auto read = [&](size_t at, absl::Span<uint64_t> out) { sum.Read(at, out); };
  return Decode(sum[mean.size()], mean, read, nullptr);
}

absl::StatusOr<int64_t> SecureQuantizer::ConsumeMean(RingVector sum, absl::Span<float> mean) const {
  if (absl::Status s = CheckSum(sum, mean.size()); !s.ok()) return s;
  auto read = [&](size_t at, absl::Span<uint64_t> out) { sum.Read(at, out); };
  auto done = [&](size_t at, size_t count) { sum.Release(at, count); };
  return Decode(sum[mean.size()], mean, read, done);
}

absl::Status SecureQuantizer::CheckSum(const RingVector& sum, size_t mean_size) const {
  if (sum.size() != mean_size + 1) {
    return absl::InvalidArgumentError("secure quantizer: sum must hold mean.size() + 1 elements");
  }
  if (sum.ring_bits() != ring_bits_) {
    return absl::InvalidArgumentError(absl::StrCat("secure quantizer: a sum in a ", sum.ring_bits(),
                                                   "-bit ring, expected ", ring_bits_, " bits"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> SecureQuantizer::Decode(
    uint64_t total, absl::Span<float> mean,
    const std::function<void(size_t, absl::Span<uint64_t>)>& read,
    const std::function<void(size_t, size_t)>& done) const {
  if (total == 0) return absl::FailedPreconditionError("secure quantizer: total weight is 0");
  if (total > static_cast<uint64_t>(options_.max_clients * options_.max_weight)) {
    return absl::InvalidArgumentError("secure quantizer: total weight exceeds n * max_weight");
  }
  absl::StatusOr<std::vector<std::pair<size_t, double>>> ranges = Ranges(mean.size());
  if (!ranges.ok()) return ranges.status();
  const uint64_t half = uint64_t{1} << (ring_bits_ - 1);
  const double per_level = 1.0 / (static_cast<double>(levels_) * static_cast<double>(total));
  const uint64_t bound = static_cast<uint64_t>(levels_) * total;
  constexpr size_t kChunk = size_t{1} << 16;
  std::vector<uint64_t> chunk(std::min(mean.size(), kChunk));
  size_t range = 0;
  for (size_t at = 0; at < mean.size(); at += chunk.size()) {
    const absl::Span<uint64_t> part =
        absl::MakeSpan(chunk).first(std::min(chunk.size(), mean.size() - at));
    read(at, part);
    for (size_t j = 0; j < part.size(); ++j) {
      const size_t i = at + j;
      while (i >= (*ranges)[range].first) ++range;
      const double factor = (*ranges)[range].second * per_level;
      const uint64_t v = part[j];
      // Two's complement in Z_{2^k}: values >= 2^(k-1) are negative.
      const int64_t s = v >= half
                            ? static_cast<int64_t>(v - half) - static_cast<int64_t>(half - 1) - 1
                            : static_cast<int64_t>(v);
      // A valid encoding is w * q with |q| <= L, so a sum of them is within L * total: past it,
      // some client's masked input was not one (a weight or a value out of range).
      const uint64_t magnitude =
          s < 0 ? static_cast<uint64_t>(-(s + 1)) + 1 : static_cast<uint64_t>(s);
      if (magnitude > bound) {
        return absl::InvalidArgumentError(absl::StrCat(
            "secure quantizer: element ", i, " of the sum is outside what its total weight ",
            total, " allows: not a sum of valid encodings"));
      }
      mean[i] = static_cast<float>(static_cast<double>(s) * factor);
    }
    if (done) done(at, part.size());
  }
  return static_cast<int64_t>(total);
}

absl::StatusOr<std::vector<std::pair<size_t, double>>> SecureQuantizer::Ranges(size_t n) const {
  if (options_.segments.empty()) return std::vector<std::pair<size_t, double>>{{n, options_.clip}};
  if (std::accumulate(options_.segments.begin(), options_.segments.end(), int64_t{0}) !=
      static_cast<int64_t>(n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("secure quantizer: the segments do not sum to the update's ", n, " values"));
  }
  std::vector<std::pair<size_t, double>> ranges;
  ranges.reserve(options_.segments.size());
  size_t end = 0;
  for (size_t i = 0; i < options_.segments.size(); ++i) {
    end += static_cast<size_t>(options_.segments[i]);
    ranges.emplace_back(end, options_.segment_clips[i]);
  }
  return ranges;
}

double SecureQuantizer::max_error() const {
  double clip = options_.segment_clips.empty() ? options_.clip : 0;
  for (double c : options_.segment_clips) clip = std::max(clip, c);
  return clip / static_cast<double>(levels_);
}

std::vector<double> SegmentClipsFromMean(absl::Span<const float> mean,
                                         absl::Span<const int64_t> segments, double headroom,
                                         double min_clip) {
  std::vector<double> clips;
  clips.reserve(segments.size());
  size_t at = 0;
  for (int64_t n : segments) {
    double largest = 0;
    for (int64_t j = 0; j < n && at < mean.size(); ++j, ++at) {
      largest = std::max(largest, std::fabs(static_cast<double>(mean[at])));
    }
    clips.push_back(std::max(min_clip, headroom * largest));
  }
  return clips;
}

}  // namespace sextant
