#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "strategies/internal/rung_ladder.h"
#include "strategies/scheduler.h"

namespace sextant {
namespace {

// One trial's reports, ordered by fidelity, with prefix sums so that the running average up
// to any step costs one binary search.
struct History {
  std::vector<double> fidelities;
  std::vector<double> prefix_sums;  // prefix_sums[i] = sum of the first i + 1 values
  double best = std::numeric_limits<double>::infinity();
  double reached = -std::numeric_limits<double>::infinity();

  void Add(double fidelity, double value) {
    // Reports normally arrive in fidelity order; one that does not is placed where it belongs.
    const auto at = std::upper_bound(fidelities.begin(), fidelities.end(), fidelity);
    const size_t i = at - fidelities.begin();
    fidelities.insert(at, fidelity);
    const double before = i == 0 ? 0 : prefix_sums[i - 1];
    prefix_sums.insert(prefix_sums.begin() + i, before + value);
    for (size_t j = i + 1; j < prefix_sums.size(); ++j) prefix_sums[j] += value;
    best = std::min(best, value);
    reached = std::max(reached, fidelity);
  }

  // The mean of the values reported at fidelities <= t; nullopt when there are none.
  std::optional<double> RunningAverage(double t) const {
    const size_t count = std::upper_bound(fidelities.begin(), fidelities.end(), t,
                                          [](double step, double f) {
                                            return !internal::ReachedFidelity(step, f);
                                          }) -
                         fidelities.begin();
    if (count == 0) return std::nullopt;
    return prefix_sums[count - 1] / static_cast<double>(count);
  }
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

class MedianStoppingScheduler final : public Scheduler {
 public:
  explicit MedianStoppingScheduler(MedianStoppingOptions options)
      : options_(std::move(options)),
        grace_(options_.grace > 0 ? options_.grace : options_.fidelity.min),
        ladder_(internal::AshaRungs(options_.fidelity), options_.fidelity.reduction_factor) {}

  Job NextJob(bool new_allowed) override {
    if (new_allowed) return Job::New(options_.fidelity.max);
    return ladder_.AnyRunning() ? Job::Wait() : Job::Done();
  }

  void OnStart(int64_t trial, const Job& /*job*/) override {
    ladder_.StartNew(trial, options_.fidelity.max);
    histories_.try_emplace(trial);
  }

  Decision OnReportValues(int64_t trial, double fidelity, absl::Span<const double> values,
                          bool feasible) override {
    auto it = histories_.find(trial);
    if (it == histories_.end()) return Decision::Continue();
    // The rule has no meaning for several objectives; it judges the first one alone.
    double value = values.empty() ? std::numeric_limits<double>::quiet_NaN() : values.front();
    if (std::isnan(value) || !feasible) value = std::numeric_limits<double>::infinity();
    ladder_.Record(trial, fidelity, values, feasible);
    it->second.Add(fidelity, value);
    // Stopping at the full budget would save nothing.
    if (!internal::ReachedFidelity(fidelity, grace_) ||
        internal::ReachedFidelity(fidelity, options_.fidelity.max)) {
      return Decision::Continue();
    }
    const std::vector<double> others = OthersRunningAverages(trial, fidelity);
    if (static_cast<int>(others.size()) < std::max(options_.min_trials, 1)) {
      return Decision::Continue();
    }
    const double median = Median(others);
    if (!(it->second.best > median)) return Decision::Continue();
    return Decision::Stop(absl::StrCat("best value ", it->second.best, " by ",
                                       options_.fidelity.name, " ", fidelity,
                                       " is worse than the median ", median, " of ", others.size(),
                                       " other trials' running averages"));
  }

  void OnEnd(int64_t trial, bool reached_target) override { ladder_.End(trial, reached_target); }

  std::map<int64_t, std::vector<double>> ValuesAtBestFidelity(int min_count) const override {
    std::map<double, std::map<int64_t, std::vector<double>>> by_fidelity;
    ladder_.CollectValues(&by_fidelity);
    return internal::AtBestFidelity(by_fidelity, min_count);
  }

  std::string Describe() const override {
    return absl::StrCat("median stopping, ", options_.fidelity.name, " ", options_.fidelity.min,
                        " to ", options_.fidelity.max, ", grace ", grace_, ", min trials ",
                        options_.min_trials);
  }

 private:
  // The running averages up to t of every other trial that has reached t.
  std::vector<double> OthersRunningAverages(int64_t trial, double t) const {
    std::vector<double> averages;
    for (const auto& [other, history] : histories_) {
      if (other == trial || !internal::ReachedFidelity(history.reached, t)) continue;
      if (std::optional<double> average = history.RunningAverage(t)) {
        averages.push_back(*average);
      }
    }
    return averages;
  }

  MedianStoppingOptions options_;
  double grace_;
  // Used only to record values at the ASHA rungs, for ValuesAtBestFidelity and for
  // knowing which trials run.
  internal::RungLadder ladder_;
  std::map<int64_t, History> histories_;
};

}  // namespace

std::unique_ptr<Scheduler> NewMedianStoppingScheduler(MedianStoppingOptions options) {
  return std::make_unique<MedianStoppingScheduler>(std::move(options));
}

}  // namespace sextant
