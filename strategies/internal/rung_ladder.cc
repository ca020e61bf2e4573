#include "strategies/internal/rung_ladder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sextant::internal {
namespace {

constexpr double kRelativeTolerance = 1e-9;
// Bounds the rung count so that a spec outside its documented ranges (min <= 0, eta < 2) gives
// a degenerate ladder rather than an endless loop.
constexpr int kMaxRungs = 64;

// A NaN would break the ordering of a rung; a trial that reports one is treated as the worst.
double Sanitize(double value) {
  return std::isnan(value) ? std::numeric_limits<double>::infinity() : value;
}

// floor(n / eta), robust to eta's representation (n = 9, eta = 3 must give 3, not 2).
int Quota(int n, double eta) { return static_cast<int>(std::floor(n / eta + kRelativeTolerance)); }

}  // namespace

bool ReachedFidelity(double fidelity, double rung) {
  return fidelity >= rung - kRelativeTolerance * std::abs(rung);
}

double EtaPower(double eta, int k) {
  double power = 1;
  for (int i = 0; i < k; ++i) power *= eta;
  return power;
}

std::vector<double> AshaRungs(const FidelitySpec& fidelity) {
  std::vector<double> rungs;
  for (int k = 0; k < kMaxRungs; ++k) {
    const double r = fidelity.min * EtaPower(fidelity.reduction_factor, k);
    if (ReachedFidelity(r, fidelity.max)) break;
    rungs.push_back(r);
  }
  rungs.push_back(fidelity.max);
  return rungs;
}

RungLadder::RungLadder(std::vector<double> rungs, double eta)
    : rungs_(std::move(rungs)), eta_(eta), by_rung_(rungs_.size()) {}

int RungLadder::RungAtOrAbove(double fidelity) const {
  for (int k = 0; k < top_rung(); ++k) {
    if (ReachedFidelity(rungs_[k], fidelity)) return k;
  }
  return top_rung();
}

void RungLadder::StartNew(int64_t trial, double target) {
  if (Contains(trial)) return;
  TrialState& state = trials_[trial];
  state.target = RungAtOrAbove(target);
  state.running = true;
  ++running_;
}

bool RungLadder::StartPromoted(int64_t trial) {
  auto it = trials_.find(trial);
  if (it == trials_.end() || !it->second.paused || it->second.target >= top_rung()) return false;
  TrialState& state = it->second;
  state.paused = false;
  state.running = true;
  ++state.target;
  ++running_;
  return true;
}

std::vector<int> RungLadder::Record(int64_t trial, double fidelity, double value) {
  std::vector<int> recorded;
  auto it = trials_.find(trial);
  if (it == trials_.end()) return recorded;
  TrialState& state = it->second;
  const std::pair<double, int64_t> entry(Sanitize(value), trial);
  while (state.recorded <= state.target && ReachedFidelity(fidelity, rungs_[state.recorded])) {
    auto& rung = by_rung_[state.recorded];
    rung.insert(std::lower_bound(rung.begin(), rung.end(), entry), entry);
    recorded.push_back(state.recorded);
    ++state.recorded;
  }
  return recorded;
}

bool RungLadder::ReachesTarget(int64_t trial, double fidelity) const {
  auto it = trials_.find(trial);
  return it != trials_.end() && it->second.running &&
         ReachedFidelity(fidelity, rungs_[it->second.target]);
}

int RungLadder::TargetRung(int64_t trial) const {
  auto it = trials_.find(trial);
  return it == trials_.end() ? -1 : it->second.target;
}

void RungLadder::End(int64_t trial, bool reached_target) {
  auto it = trials_.find(trial);
  if (it == trials_.end() || !it->second.running) return;
  TrialState& state = it->second;
  state.running = false;
  --running_;
  // A trial that claims success without a value at its target rung has nothing to be ranked
  // by there, so it cannot be promoted.
  state.paused = reached_target && state.target < top_rung() && state.recorded > state.target;
}

std::optional<Promotion> RungLadder::FindPromotion() const {
  for (int k = top_rung() - 1; k >= 0; --k) {
    const auto& rung = by_rung_[k];
    const int quota = Quota(static_cast<int>(rung.size()), eta_);
    for (int i = 0; i < quota; ++i) {
      const TrialState& state = trials_.at(rung[i].second);
      if (state.paused && state.target == k) {
        return Promotion{rung[i].second, k, rungs_[k + 1]};
      }
    }
  }
  return std::nullopt;
}

std::optional<double> RungLadder::Cutoff(int rung) const {
  const auto& values = by_rung_[rung];
  const int n = static_cast<int>(values.size());
  if (n < eta_ - kRelativeTolerance) return std::nullopt;
  return values[Quota(n, eta_) - 1].first;
}

void RungLadder::CollectObservations(std::map<double, std::map<int64_t, double>>* out) const {
  for (size_t k = 0; k < rungs_.size(); ++k) {
    if (by_rung_[k].empty()) continue;
    auto& at = (*out)[rungs_[k]];
    for (const auto& [value, trial] : by_rung_[k]) at[trial] = value;
  }
}

std::map<int64_t, double> AtBestFidelity(
    const std::map<double, std::map<int64_t, double>>& by_fidelity, int min_count) {
  for (auto it = by_fidelity.rbegin(); it != by_fidelity.rend(); ++it) {
    if (static_cast<int>(it->second.size()) >= min_count) return it->second;
  }
  return {};
}

Decision PromotionModeDecision(const RungLadder& ladder, int64_t trial, double fidelity,
                               const std::string& fidelity_name) {
  if (!ladder.ReachesTarget(trial, fidelity)) return Decision::Continue();
  const int rung = ladder.TargetRung(trial);
  if (rung == ladder.top_rung()) return Decision::Continue();
  return Decision::Pause(absl::StrCat("reached rung ", rung, " (", fidelity_name, " ",
                                      ladder.rungs()[rung], "); paused until promoted"));
}

std::string FormatFidelities(const std::vector<double>& fidelities) {
  return absl::StrJoin(fidelities, ", ",
                       [](std::string* out, double r) { absl::StrAppend(out, r); });
}

}  // namespace sextant::internal
