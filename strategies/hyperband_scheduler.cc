#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "strategies/internal/rung_ladder.h"
#include "strategies/scheduler.h"

namespace sextant {
namespace {

// Asynchronous Hyperband. Every bracket runs ASHA in promotion mode over its own rungs r_i.
// A bracket is played in rounds: a round takes the bracket's next n_0 new trials and ranks
// them only against each other, so that a complete round promotes exactly the paper's n_i
// (floor(n_i / eta) = n_{i+1}); the next new trial of that bracket opens a new round while the
// older rounds go on promoting. New trials go to brackets by stride scheduling on n_0, which
// gives each bracket exactly n_0 of every sum(n_0) consecutive new trials, s_max first.
class HyperbandScheduler final : public Scheduler {
 public:
  explicit HyperbandScheduler(FidelitySpec fidelity) : fidelity_(std::move(fidelity)) {
    for (BracketPlan& plan : HyperbandBrackets(fidelity_)) {
      brackets_.push_back(Bracket{std::move(plan), {}, 0, 0});
    }
  }

  Job NextJob(bool new_allowed) override {
    if (auto job = BestPromotion()) return *job;
    if (new_allowed) {
      const BracketPlan& plan = brackets_[NextBracket()].plan;
      return Job::New(plan.r.front(), plan.s);
    }
    // As in ASHA: with nothing running, no rung can change, so nothing can become promotable.
    return AnyRunning() ? Job::Wait() : Job::Done();
  }

  void OnStart(int64_t trial, const Job& job) override {
    if (job.kind == Job::Kind::kPromote) {
      if (internal::RungLadder* ladder = LadderOf(trial)) ladder->StartPromoted(trial);
      return;
    }
    if (placements_.count(trial) > 0) return;
    const int b = BracketIndex(job.bracket);
    Bracket& bracket = brackets_[b];
    if (bracket.rounds.empty() || bracket.in_round >= bracket.plan.n.front()) {
      bracket.rounds.emplace_back(bracket.plan.r, fidelity_.reduction_factor);
      bracket.in_round = 0;
    }
    bracket.rounds.back().StartNew(trial, job.target);
    ++bracket.in_round;
    ++bracket.started;
    placements_[trial] = Placement{b, static_cast<int>(bracket.rounds.size()) - 1};
  }

  Decision OnReportValues(int64_t trial, double fidelity, absl::Span<const double> values,
                          bool feasible) override {
    internal::RungLadder* ladder = LadderOf(trial);
    if (ladder == nullptr) return Decision::Continue();
    ladder->Record(trial, fidelity, values, feasible);
    return internal::PromotionModeDecision(*ladder, trial, fidelity, fidelity_.name);
  }

  void OnEnd(int64_t trial, bool reached_target) override {
    if (internal::RungLadder* ladder = LadderOf(trial)) ladder->End(trial, reached_target);
  }

  std::map<int64_t, std::vector<double>> ValuesAtBestFidelity(int min_count) const override {
    // Every bracket's rungs lie on the grid max * eta^-j, so equal budgets pool across brackets
    // and rounds, as BOHB's model expects.
    std::map<double, std::map<int64_t, std::vector<double>>> by_fidelity;
    for (const Bracket& bracket : brackets_) {
      for (const internal::RungLadder& round : bracket.rounds) {
        round.CollectValues(&by_fidelity);
      }
    }
    return internal::AtBestFidelity(by_fidelity, min_count);
  }

  std::string Describe() const override {
    std::string out = absl::StrCat("Hyperband (asynchronous brackets), eta ",
                                   fidelity_.reduction_factor, ", ", fidelity_.name, ":");
    for (const Bracket& bracket : brackets_) {
      std::vector<double> n(bracket.plan.n.begin(), bracket.plan.n.end());
      absl::StrAppend(&out, " [s=", bracket.plan.s, " n=", internal::FormatFidelities(n),
                      " r=", internal::FormatFidelities(bracket.plan.r), "]");
    }
    return out;
  }

 private:
  struct Bracket {
    BracketPlan plan;
    std::vector<internal::RungLadder> rounds;  // oldest first
    int in_round = 0;                          // new trials in rounds.back()
    int64_t started = 0;                       // new trials over all rounds
  };
  struct Placement {
    int bracket = 0;  // index into brackets_
    int round = 0;    // index into Bracket::rounds
  };

  // The promotion with the highest target over all brackets and rounds (ASHA's top-down
  // preference, which finishes trials before widening); ties go to the larger bracket, then
  // to the older round.
  std::optional<Job> BestPromotion() const {
    std::optional<Job> best;
    for (const Bracket& bracket : brackets_) {
      for (const internal::RungLadder& round : bracket.rounds) {
        const std::optional<internal::Promotion> promotion = round.FindPromotion();
        if (promotion.has_value() && (!best.has_value() || promotion->target > best->target)) {
          best = Job::Promote(promotion->trial, promotion->target, bracket.plan.s);
        }
      }
    }
    return best;
  }

  // Stride scheduling: the bracket whose next trial has the smallest (started + 1/2) / n_0.
  int NextBracket() const {
    int best = 0;
    for (int b = 1; b < static_cast<int>(brackets_.size()); ++b) {
      // (2 c_b + 1) / n_b < (2 c_best + 1) / n_best, cross-multiplied to stay exact.
      const int64_t lhs = (2 * brackets_[b].started + 1) * brackets_[best].plan.n.front();
      const int64_t rhs = (2 * brackets_[best].started + 1) * brackets_[b].plan.n.front();
      if (lhs < rhs) best = b;
    }
    return best;
  }

  // The index of the bracket with this s; a caller that passes an unknown s gets the bracket
  // the schedule would pick.
  int BracketIndex(int s) const {
    for (int b = 0; b < static_cast<int>(brackets_.size()); ++b) {
      if (brackets_[b].plan.s == s) return b;
    }
    return NextBracket();
  }

  internal::RungLadder* LadderOf(int64_t trial) {
    auto it = placements_.find(trial);
    if (it == placements_.end()) return nullptr;
    return &brackets_[it->second.bracket].rounds[it->second.round];
  }

  bool AnyRunning() const {
    for (const Bracket& bracket : brackets_) {
      for (const internal::RungLadder& round : bracket.rounds) {
        if (round.AnyRunning()) return true;
      }
    }
    return false;
  }

  FidelitySpec fidelity_;
  std::vector<Bracket> brackets_;  // s_max first
  std::unordered_map<int64_t, Placement> placements_;
};

}  // namespace

std::unique_ptr<Scheduler> NewHyperbandScheduler(FidelitySpec fidelity) {
  return std::make_unique<HyperbandScheduler>(std::move(fidelity));
}

}  // namespace sextant
