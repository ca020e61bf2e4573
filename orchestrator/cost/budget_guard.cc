#include "orchestrator/cost/budget_guard.h"

#include "absl/strings/str_format.h"

namespace sextant {

bool BudgetGuard::Allows(double committed, double projected, double extra, std::string* why) const {
  if (!max_cost_) return true;
  const double total = committed + projected + extra;
  // A relative tolerance keeps float noise in long sums from refusing an action that fits.
  if (total <= *max_cost_ * (1 + 1e-12)) return true;
  if (why != nullptr) {
    *why = absl::StrFormat(
        "committed %.4f + projected %.4f + this action %.4f = %.4f would exceed max_cost %.4f",
        committed, projected, extra, total, *max_cost_);
  }
  return false;
}

}  // namespace sextant
