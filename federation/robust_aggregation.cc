#include "federation/robust_aggregation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

using Updates = absl::Span<const absl::Span<const float>>;

absl::Status CheckShapes(Updates updates, size_t out_size) {
  if (updates.empty()) return absl::InvalidArgumentError("no updates to aggregate");
  for (size_t i = 0; i < updates.size(); ++i) {
    if (updates[i].size() != out_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("update ", i, " has ", updates[i].size(), " values, expected ", out_size));
    }
  }
  return absl::OkStatus();
}

// Calls fn(j, column) for every coordinate j with column sorted ascending.
template <typename Fn>
void ForEachSortedColumn(Updates updates, size_t d, Fn fn) {
  std::vector<float> column(updates.size());
  for (size_t j = 0; j < d; ++j) {
    for (size_t i = 0; i < updates.size(); ++i) column[i] = updates[i][j];
    std::sort(column.begin(), column.end());
    fn(j, column);
  }
}

double SquaredDistance(absl::Span<const float> a, absl::Span<const float> b) {
  double sum = 0;
  for (size_t j = 0; j < a.size(); ++j) {
    const double diff = static_cast<double>(a[j]) - b[j];
    sum += diff * diff;
  }
  return sum;
}

}  // namespace

absl::Status CoordinateMedian(Updates updates, absl::Span<float> out) {
  if (absl::Status s = CheckShapes(updates, out.size()); !s.ok()) return s;
  const size_t n = updates.size();
  ForEachSortedColumn(updates, out.size(), [&](size_t j, const std::vector<float>& c) {
    out[j] =
        n % 2 ? c[n / 2] : static_cast<float>((static_cast<double>(c[n / 2 - 1]) + c[n / 2]) / 2);
  });
  return absl::OkStatus();
}

absl::Status TrimmedMean(Updates updates, double beta, absl::Span<float> out) {
  if (absl::Status s = CheckShapes(updates, out.size()); !s.ok()) return s;
  if (!(beta >= 0 && beta < 0.5)) {
    return absl::InvalidArgumentError(absl::StrCat("beta must be in [0, 0.5), got ", beta));
  }
  const size_t n = updates.size();
  const size_t k = static_cast<size_t>(std::floor(beta * static_cast<double>(n)));
  if (n <= 2 * k) {
    return absl::InvalidArgumentError(
        absl::StrCat("trimming ", k, " from each end of ", n, " updates leaves none"));
  }
  ForEachSortedColumn(updates, out.size(), [&](size_t j, const std::vector<float>& c) {
    double sum = 0;
    for (size_t i = k; i < n - k; ++i) sum += c[i];
    out[j] = static_cast<float>(sum / static_cast<double>(n - 2 * k));
  });
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> KrumScores(Updates updates, size_t f) {
  if (updates.empty()) return absl::InvalidArgumentError("no updates to aggregate");
  if (absl::Status s = CheckShapes(updates, updates[0].size()); !s.ok()) return s;
  const size_t n = updates.size();
  if (n < 2 * f + 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("Krum with f = ", f, " needs at least ", 2 * f + 3, " updates, got ", n));
  }
  std::vector<double> dist(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      dist[i * n + j] = dist[j * n + i] = SquaredDistance(updates[i], updates[j]);
    }
  }
  std::vector<double> scores(n);
  std::vector<double> row;
  const size_t nearest = n - f - 2;
  for (size_t i = 0; i < n; ++i) {
    row.clear();
    for (size_t j = 0; j < n; ++j) {
      if (j != i) row.push_back(dist[i * n + j]);
    }
    std::partial_sort(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(nearest), row.end());
    scores[i] =
        std::accumulate(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(nearest), 0.0);
  }
  return scores;
}

absl::StatusOr<std::vector<size_t>> MultiKrum(Updates updates, size_t f, size_t m,
                                              absl::Span<float> out) {
  if (absl::Status s = CheckShapes(updates, out.size()); !s.ok()) return s;
  if (m < 1 || m > updates.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("m must be in [1, ", updates.size(), "], got ", m));
  }
  absl::StatusOr<std::vector<double>> scores = KrumScores(updates, f);
  if (!scores.ok()) return scores.status();
  std::vector<size_t> order(updates.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return (*scores)[a] < (*scores)[b]; });
  order.resize(m);
  for (size_t j = 0; j < out.size(); ++j) {
    double sum = 0;
    for (size_t i : order) sum += updates[i][j];
    out[j] = static_cast<float>(sum / static_cast<double>(m));
  }
  return order;
}

absl::StatusOr<size_t> Krum(Updates updates, size_t f, absl::Span<float> out) {
  absl::StatusOr<std::vector<size_t>> chosen = MultiKrum(updates, f, 1, out);
  if (!chosen.ok()) return chosen.status();
  return (*chosen)[0];
}

}  // namespace sextant
