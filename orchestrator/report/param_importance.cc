#include "orchestrator/report/param_importance.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

namespace sextant {
namespace {

// Clips the values to their 5th and 95th percentiles.
std::vector<double> Winsorize(const std::vector<double>& y) {
  std::vector<double> sorted = y;
  std::sort(sorted.begin(), sorted.end());
  const size_t k = static_cast<size_t>(0.05 * (sorted.size() - 1));
  const double lo = sorted[k], hi = sorted[sorted.size() - 1 - k];
  std::vector<double> out;
  for (double v : y) out.push_back(std::clamp(v, lo, hi));
  return out;
}

// The bin of each value; returns the number of bins through *bins.
std::vector<int> Bin(const ImportanceInput& p, int* bins) {
  const size_t n = p.values.size();
  std::vector<int> bin(n, 0);
  std::map<double, int> distinct;
  for (double v : p.values) {
    if (!std::isnan(v)) distinct.emplace(v, 0);
  }
  bool has_missing =
      std::any_of(p.values.begin(), p.values.end(), [](double v) { return std::isnan(v); });
  if (p.categorical || distinct.size() <= 8) {
    int next = 0;
    for (auto& [v, id] : distinct) id = next++;
    for (size_t i = 0; i < n; ++i) bin[i] = std::isnan(p.values[i]) ? next : distinct[p.values[i]];
    *bins = next + (has_missing ? 1 : 0);
    return bin;
  }
  std::vector<std::pair<double, size_t>> sorted;
  for (size_t i = 0; i < n; ++i) {
    double v = p.values[i];
    if (std::isnan(v)) continue;
    sorted.emplace_back(p.log && v > 0 ? std::log10(v) : v, i);
  }
  std::sort(sorted.begin(), sorted.end());
  int b = std::max(2, std::min<int>(8, static_cast<int>(n) / 5));
  for (size_t k = 0; k < sorted.size(); ++k) {
    bin[sorted[k].second] = static_cast<int>(k * b / sorted.size());
  }
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(p.values[i])) bin[i] = b;
  }
  *bins = b + (has_missing ? 1 : 0);
  return bin;
}

}  // namespace

std::vector<ParamImportance> MainEffectImportance(const std::vector<ImportanceInput>& params,
                                                  const std::vector<double>& objective) {
  std::vector<ParamImportance> out;
  for (const auto& p : params) out.push_back(ParamImportance{p.name, 0, 0});
  const size_t n = objective.size();
  if (n < 4) return out;
  std::vector<double> r = Winsorize(objective);
  const double mean = std::accumulate(r.begin(), r.end(), 0.0) / n;
  double total = 0;
  for (double v : r) total += (v - mean) * (v - mean);
  if (!(total > 1e-12 * (1 + mean * mean) * n)) return out;
  for (size_t j = 0; j < params.size(); ++j) {
    if (params[j].values.size() != n) continue;
    int bins = 0;
    std::vector<int> bin = Bin(params[j], &bins);
    std::vector<double> sum(bins + 1, 0), count(bins + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      sum[bin[i]] += r[i];
      count[bin[i]] += 1;
    }
    double between = 0;
    int used = 0;
    for (int b = 0; b <= bins; ++b) {
      if (count[b] == 0) continue;
      ++used;
      double m = sum[b] / count[b];
      between += count[b] * (m - mean) * (m - mean);
    }
    double eta2 = between / total;
    double chance = static_cast<double>(used - 1) / (n - 1);
    out[j].bins = used;
    out[j].importance = chance >= 1 ? 0 : std::clamp((eta2 - chance) / (1 - chance), 0.0, 1.0);
  }
  return out;
}

}  // namespace sextant
