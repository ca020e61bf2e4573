#include <cmath>
#include <utility>
#include <vector>

#include "strategies/internal/rung_ladder.h"
#include "strategies/scheduler.h"

namespace sextant {
namespace {

// Guards the floors and ceilings below against representation error: (5/4) * 27 must give
// 34 and 81 / 3^4 must give 1, whatever the last bits of the product.
constexpr double kTolerance = 1e-9;
// Bounds s_max so that a spec outside its documented ranges cannot loop for ever.
constexpr int kMaxBrackets = 64;

int MaxBracket(double ratio, double eta) {
  int s = 0;
  while (s < kMaxBrackets && internal::EtaPower(eta, s + 1) <= ratio * (1 + kTolerance)) ++s;
  return s;
}

}  // namespace

std::vector<BracketPlan> HyperbandBrackets(const FidelitySpec& fidelity) {
  const double eta = fidelity.reduction_factor;
  const int s_max = MaxBracket(fidelity.max / fidelity.min, eta);
  std::vector<BracketPlan> brackets;
  for (int s = s_max; s >= 0; --s) {
    BracketPlan plan;
    plan.s = s;
    const double n = std::ceil(
        static_cast<double>(s_max + 1) / (s + 1) * internal::EtaPower(eta, s) - kTolerance);
    for (int i = 0; i <= s; ++i) {
      plan.n.push_back(static_cast<int>(std::floor(n / internal::EtaPower(eta, i) + kTolerance)));
      // r_i = R * eta^-(s-i), computed from max so that every bracket shares the same grid and
      // the last rung is exactly max.
      plan.r.push_back(i == s ? fidelity.max : fidelity.max / internal::EtaPower(eta, s - i));
    }
    brackets.push_back(std::move(plan));
  }
  return brackets;
}

}  // namespace sextant
