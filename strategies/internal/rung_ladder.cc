#include "strategies/internal/rung_ladder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "strategies/pareto.h"

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

bool Enough(int n, double eta) { return n >= eta - kRelativeTolerance; }

// Ranks `members` (indices into points) among themselves, from rank `first` on; writes each
// member's rank, and the crowding distance of the members of every front that begins within
// the first `*ordered` (the only ones whose order decides anything: promotion order, and who
// is in the top), and takes the members so ordered off `*ordered`. Returns one past the last
// rank used.
int RankGroup(const std::vector<std::vector<double>>& points, const std::vector<int>& members,
              int first, int* ordered, std::vector<int>* rank, std::vector<double>* crowding) {
  if (members.empty()) return first;
  // Most rungs have no infeasible entry; then the group is all the points, uncopied.
  std::vector<std::vector<double>> copy;
  if (members.size() != points.size()) {
    copy.reserve(members.size());
    for (int m : members) copy.push_back(points[m]);
  }
  const std::vector<std::vector<double>>& group = copy.empty() ? points : copy;
  const std::vector<int> ranks = NonDominatedRanks(group);
  const int fronts = *std::max_element(ranks.begin(), ranks.end()) + 1;
  std::vector<std::vector<int>> by_front(fronts);
  for (int i = 0; i < static_cast<int>(ranks.size()); ++i) {
    by_front[ranks[i]].push_back(i);
    (*rank)[members[i]] = first + ranks[i];
  }
  for (int f = 0; f < fronts; ++f) {
    if (*ordered <= 0) break;
    const std::vector<double> distances = CrowdingDistances(group, by_front[f]);
    for (size_t j = 0; j < by_front[f].size(); ++j) {
      // +inf values (NaN reports) can make a distance NaN, which would break the sort.
      (*crowding)[members[by_front[f][j]]] = std::isnan(distances[j]) ? 0 : distances[j];
    }
    *ordered -= static_cast<int>(by_front[f].size());
  }
  return first + fronts;
}

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
  if (objectives_ <= 1) by_rung_[state.target].paused.erase(KeyAt(state.target, state));
  state.paused = false;
  state.running = true;
  ++state.target;
  ++running_;
  return true;
}

std::vector<double> RungLadder::Normalised(absl::Span<const double> values) const {
  std::vector<double> out(objectives_, std::numeric_limits<double>::infinity());
  for (int i = 0; i < objectives_ && i < static_cast<int>(values.size()); ++i) {
    out[i] = Sanitize(values[i]);
  }
  return out;
}

void RungLadder::Insert(Rung& rung, Entry entry, std::vector<double> values) const {
  const int index = static_cast<int>(rung.entries.size());
  rung.entries.push_back(entry);
  rung.points.push_back(std::move(values));
  if (objectives_ > 1) {
    rung.stale = true;
    return;
  }
  // One objective: an insertion keeps the order, at O(n) rather than a re-sort per change.
  const auto key = [&rung](int i) {
    const Entry& e = rung.entries[i];
    return std::make_tuple(!e.feasible, rung.points[i].front(), e.trial);
  };
  const auto at = std::lower_bound(rung.order.begin(), rung.order.end(), index,
                                   [&key](int a, int b) { return key(a) < key(b); });
  rung.order.insert(at, index);
}

std::vector<int> RungLadder::Record(int64_t trial, double fidelity, absl::Span<const double> values,
                                    bool feasible) {
  std::vector<int> recorded;
  auto it = trials_.find(trial);
  if (it == trials_.end()) return recorded;
  if (objectives_ == 0) objectives_ = std::max(static_cast<int>(values.size()), 1);
  TrialState& state = it->second;
  const std::vector<double> normalised = Normalised(values);
  while (state.recorded <= state.target && ReachedFidelity(fidelity, rungs_[state.recorded])) {
    Rung& rung = by_rung_[state.recorded];
    state.slot.push_back(static_cast<int>(rung.entries.size()));
    Insert(rung, Entry{trial, feasible}, normalised);
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
  if (state.paused && objectives_ <= 1)
    by_rung_[state.target].paused.insert(KeyAt(state.target, state));
}

std::tuple<bool, double, int64_t> RungLadder::KeyAt(int k, const TrialState& state) const {
  const Rung& rung = by_rung_[k];
  const int slot = state.slot[k];
  return {!rung.entries[slot].feasible, rung.points[slot].front(), rung.entries[slot].trial};
}

void RungLadder::Rerank(Rung& rung) const {
  const int n = static_cast<int>(rung.entries.size());
  std::vector<int> feasible;
  std::vector<int> infeasible;
  for (int i = 0; i < n; ++i) (rung.entries[i].feasible ? feasible : infeasible).push_back(i);
  rung.rank.assign(n, 0);
  std::vector<double> crowding(n, 0);
  int ordered = Quota(n, eta_);
  const int next = RankGroup(rung.points, feasible, 0, &ordered, &rung.rank, &crowding);
  RankGroup(rung.points, infeasible, next, &ordered, &rung.rank, &crowding);
  rung.order.resize(n);
  for (int i = 0; i < n; ++i) rung.order[i] = i;
  std::sort(rung.order.begin(), rung.order.end(), [&](int a, int b) {
    if (rung.rank[a] != rung.rank[b]) return rung.rank[a] < rung.rank[b];
    if (crowding[a] != crowding[b]) return crowding[a] > crowding[b];
    return rung.entries[a].trial < rung.entries[b].trial;
  });
  rung.position.resize(n);
  for (int i = 0; i < n; ++i) rung.position[rung.order[i]] = i;
  rung.stale = false;
}

const RungLadder::Rung& RungLadder::Ranked(int k) const {
  Rung& rung = by_rung_[k];
  if (rung.stale) Rerank(rung);
  return rung;
}

std::optional<Promotion> RungLadder::FindPromotion() const {
  if (objectives_ <= 1) {
    // The best paused entry of a rung is in its top exactly when fewer than quota entries
    // order before it: O(log n) per rung instead of a walk over the top.
    for (int k = top_rung() - 1; k >= 0; --k) {
      const Rung& rung = by_rung_[k];
      if (rung.paused.empty()) continue;
      const int quota = Quota(static_cast<int>(rung.entries.size()), eta_);
      const auto& best = *rung.paused.begin();
      const auto key = [&rung](int i) {
        const Entry& e = rung.entries[i];
        return std::make_tuple(!e.feasible, rung.points[i].front(), e.trial);
      };
      const auto at = std::lower_bound(rung.order.begin(), rung.order.end(), best,
                                       [&key](int a, const auto& b) { return key(a) < b; });
      if (at - rung.order.begin() < quota) return Promotion{std::get<2>(best), k, rungs_[k + 1]};
    }
    return std::nullopt;
  }
  for (int k = top_rung() - 1; k >= 0; --k) {
    const Rung& rung = Ranked(k);
    const int quota = Quota(static_cast<int>(rung.entries.size()), eta_);
    for (int i = 0; i < quota; ++i) {
      const int64_t trial = rung.entries[rung.order[i]].trial;
      const TrialState& state = trials_.at(trial);
      if (state.paused && state.target == k) return Promotion{trial, k, rungs_[k + 1]};
    }
  }
  return std::nullopt;
}

bool RungLadder::OutsideTop(int rung, int64_t trial) const {
  auto it = trials_.find(trial);
  if (it == trials_.end() || it->second.recorded <= rung) return false;
  const Rung& ranked = Ranked(rung);
  const int n = static_cast<int>(ranked.entries.size());
  if (!Enough(n, eta_)) return false;
  const int quota = Quota(n, eta_);
  const int slot = it->second.slot[rung];
  if (objectives_ > 1) return ranked.position[slot] >= quota;
  const int cutoff = ranked.order[quota - 1];
  return std::make_pair(!ranked.entries[slot].feasible, ranked.points[slot].front()) >
         std::make_pair(!ranked.entries[cutoff].feasible, ranked.points[cutoff].front());
}

std::optional<double> RungLadder::Cutoff(int rung) const {
  const Rung& ranked = Ranked(rung);
  const int n = static_cast<int>(ranked.entries.size());
  if (!Enough(n, eta_)) return std::nullopt;
  return ranked.points[ranked.order[Quota(n, eta_) - 1]].front();
}

int RungLadder::ParetoRank(int rung, int64_t trial) const {
  auto it = trials_.find(trial);
  if (objectives_ <= 1 || it == trials_.end() || it->second.recorded <= rung) return -1;
  return Ranked(rung).rank[it->second.slot[rung]];
}

void RungLadder::CollectValues(
    std::map<double, std::map<int64_t, std::vector<double>>>* out) const {
  for (size_t k = 0; k < rungs_.size(); ++k) {
    if (by_rung_[k].entries.empty()) continue;
    const Rung& rung = by_rung_[k];
    auto& at = (*out)[rungs_[k]];
    for (size_t i = 0; i < rung.entries.size(); ++i) at[rung.entries[i].trial] = rung.points[i];
  }
}

std::map<int64_t, std::vector<double>> AtBestFidelity(
    const std::map<double, std::map<int64_t, std::vector<double>>>& by_fidelity, int min_count) {
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
