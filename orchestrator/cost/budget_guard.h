#ifndef SEXTANT_ORCHESTRATOR_COST_BUDGET_GUARD_H_
#define SEXTANT_ORCHESTRATOR_COST_BUDGET_GUARD_H_

#include <optional>
#include <string>

namespace sextant {

// The hard cost cap, checked before acting: a launch or a promotion is allowed only when
// committed spend plus the projected spend of work already under way plus the action's own
// projected spend stays within max_cost. Pure; thread-compatible.
class BudgetGuard {
 public:
  // No cap when max_cost is empty.
  explicit BudgetGuard(std::optional<double> max_cost) : max_cost_(max_cost) {}

  // True when committed + projected + extra <= max_cost (always true without a cap). When
  // false and why is non-null, *why says by how much the action would overshoot.
  bool Allows(double committed, double projected, double extra, std::string* why = nullptr) const;

  // True when spend has reached the cap: running work must checkpoint and stop.
  bool Exhausted(double committed) const { return max_cost_ && committed >= *max_cost_; }

  std::optional<double> max_cost() const { return max_cost_; }

 private:
  std::optional<double> max_cost_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_COST_BUDGET_GUARD_H_
