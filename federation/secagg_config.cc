#include "federation/secagg_config.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sextant {

absl::Status ValidateSecAggConfig(const SecAggConfig& c) {
  if (c.experiment_id.empty()) return absl::InvalidArgumentError("secagg: empty experiment id");
  if (c.num_clients < 2) return absl::InvalidArgumentError("secagg: num_clients must be >= 2");
  const bool complete = c.degree == c.num_clients - 1;
  if (c.degree < 1 || c.degree > c.num_clients - 1 || (!complete && c.degree % 2 != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secagg: degree ", c.degree, " must be even and < n, or n - 1 (n = ", c.num_clients, ")"));
  }
  const int32_t holders = c.degree + 1;
  if (c.threshold <= holders / 2 || c.threshold > holders) {
    return absl::InvalidArgumentError(absl::StrCat("secagg: threshold ", c.threshold,
                                                   " must be a strict majority of the ", holders,
                                                   " share holders"));
  }
  if (c.ring_bits < 1 || c.ring_bits > 64) {
    return absl::InvalidArgumentError("secagg: ring_bits must be in 1..64");
  }
  if (c.vector_length == 0) return absl::InvalidArgumentError("secagg: empty vector");
  return absl::OkStatus();
}

SecAggGraph::SecAggGraph(const SecAggConfig& config) {
  const int32_t n = std::max(config.num_clients, 0);
  neighbours_.resize(n);
  if (n == 0) return;
  if (config.degree >= n - 1) {
    for (int32_t a = 0; a < n; ++a) {
      for (int32_t b = 0; b < n; ++b) {
        if (a != b) neighbours_[a].push_back(b);
      }
    }
    return;
  }
  // Fisher-Yates with our own bounded draw: std::shuffle's output is not specified, and every
  // party must derive the same graph.
  std::mt19937_64 rng(config.graph_seed);
  std::vector<int32_t> label(n);
  for (int32_t i = 0; i < n; ++i) label[i] = i;
  for (int32_t i = n - 1; i > 0; --i) {
    const uint64_t j = rng() % static_cast<uint64_t>(i + 1);
    std::swap(label[i], label[j]);
  }
  const int32_t half = config.degree / 2;
  for (int32_t p = 0; p < n; ++p) {
    for (int32_t s = 1; s <= half; ++s) {
      neighbours_[label[p]].push_back(label[(p + s) % n]);
      neighbours_[label[p]].push_back(label[(p - s + n) % n]);
    }
  }
  for (auto& list : neighbours_) std::sort(list.begin(), list.end());
}

std::vector<int32_t> SecAggGraph::holders(int32_t client) const {
  std::vector<int32_t> h = neighbours_[client];
  h.insert(std::upper_bound(h.begin(), h.end(), client), client);
  return h;
}

bool SecAggGraph::adjacent(int32_t a, int32_t b) const {
  const auto& list = neighbours_[a];
  return std::binary_search(list.begin(), list.end(), b);
}

namespace {
// log P[Bin(m, p) < t].
double LogBinomialTailBelow(int32_t m, double p, int32_t t) {
  double max_term = -INFINITY;
  std::vector<double> terms;
  for (int32_t j = 0; j < t && j <= m; ++j) {
    const double lt = std::lgamma(m + 1.0) - std::lgamma(j + 1.0) - std::lgamma(m - j + 1.0) +
                      j * std::log(p) + (m - j) * std::log1p(-p);
    terms.push_back(lt);
    max_term = std::max(max_term, lt);
  }
  if (terms.empty()) return -INFINITY;
  double s = 0;
  for (double lt : terms) s += std::exp(lt - max_term);
  return max_term + std::log(s);
}
}  // namespace

absl::StatusOr<SecAggGraphChoice> ChooseSecAggGraph(int32_t n, double dropout_rate,
                                                    int correctness_bits) {
  if (n < 2) return absl::InvalidArgumentError("secagg: need at least 2 clients");
  if (!(dropout_rate >= 0 && dropout_rate < 1)) {
    return absl::InvalidArgumentError("secagg: dropout rate must be in [0, 1)");
  }
  const int32_t log2n = static_cast<int32_t>(std::ceil(std::log2(static_cast<double>(n))));
  int32_t k = std::max(2, 2 * log2n);
  const double log_target = -correctness_bits * std::log(2.0);
  for (;;) {
    if (k >= n - 1) k = n - 1;
    SecAggGraphChoice c;
    c.degree = k;
    c.threshold = (k + 1) / 2 + 1;
    const double log_fail = dropout_rate == 0
                                ? -INFINITY
                                : std::log(static_cast<double>(n)) +
                                      LogBinomialTailBelow(k + 1, 1 - dropout_rate, c.threshold);
    c.failure_probability = std::min(1.0, std::exp(log_fail));
    c.meets_target = log_fail <= log_target;
    if (c.meets_target || k == n - 1) return c;
    k += 2;
  }
}

absl::StatusOr<SecAggConfig> PlanSecAggRound(std::string experiment_id, int64_t round,
                                             int32_t num_clients, double dropout_rate,
                                             int32_t ring_bits, size_t vector_length,
                                             uint64_t graph_seed, int correctness_bits) {
  absl::StatusOr<SecAggGraphChoice> choice =
      ChooseSecAggGraph(num_clients, dropout_rate, correctness_bits);
  if (!choice.ok()) return choice.status();
  SecAggConfig c;
  c.experiment_id = std::move(experiment_id);
  c.round = round;
  c.num_clients = num_clients;
  c.degree = choice->degree;
  c.threshold = choice->threshold;
  c.ring_bits = ring_bits;
  c.vector_length = vector_length;
  c.graph_seed = graph_seed;
  if (absl::Status s = ValidateSecAggConfig(c); !s.ok()) return s;
  return c;
}

absl::StatusOr<SecAggConfig> RegionalLayerConfig(std::string experiment_id, int64_t round,
                                                 int32_t num_regions, int32_t ring_bits,
                                                 size_t vector_length, uint64_t graph_seed) {
  if (num_regions < 2) {
    return absl::InvalidArgumentError("secagg: the regional layer needs at least 2 regions");
  }
  SecAggConfig c;
  c.experiment_id = std::move(experiment_id);
  c.round = round;
  c.num_clients = num_regions;
  c.degree = num_regions - 1;
  c.threshold = num_regions / 2 + 1;
  c.ring_bits = ring_bits;
  c.vector_length = vector_length;
  c.graph_seed = graph_seed;
  if (absl::Status s = ValidateSecAggConfig(c); !s.ok()) return s;
  return c;
}

absl::Status ValidateSecureAggregationRule(absl::string_view rule) {
  if (rule == "fedavg" || rule == "mean" || rule == "weighted_mean") return absl::OkStatus();
  if (rule == "median" || rule == "coordinate_median" || rule == "trimmed_mean" || rule == "krum" ||
      rule == "multi_krum") {
    return absl::InvalidArgumentError(absl::StrCat(
        "aggregation rule '", rule,
        "' cannot run under secure aggregation: it needs every client's update in the clear "
        "(to sort coordinates or compare distances), while secure aggregation reveals only the "
        "sum. Use 'fedavg' with secure aggregation, or turn secure aggregation off to use '",
        rule, "'"));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown aggregation rule '", rule, "'"));
}

}  // namespace sextant
