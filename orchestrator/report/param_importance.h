#ifndef SEXTANT_ORCHESTRATOR_REPORT_PARAM_IMPORTANCE_H_
#define SEXTANT_ORCHESTRATOR_REPORT_PARAM_IMPORTANCE_H_

#include <string>
#include <vector>

namespace sextant {

// One parameter's column of values across the completed trials. NaN marks a trial where the
// parameter was absent (a conditional parameter); such trials form their own bin.
struct ImportanceInput {
  std::string name;
  std::vector<double> values;  // numbers, or category indices when categorical
  bool categorical = false;
  bool log = false;  // bin on log10(value)
};

struct ParamImportance {
  std::string name;
  double importance = 0;  // adjusted share of the objective's variance, in [0, 1]
  int bins = 0;
};

// The main-effect importance of each parameter, as a functional ANOVA over binned marginals:
//   1. the objective is clipped to its 5th and 95th percentiles, so that one diverged trial
//      cannot dominate;
//   2. each parameter's values are split into bins: one per category (or per distinct value
//      when there are at most 8), otherwise up to min(8, n/5) equal-count bins of the
//      (log-)value;
//   3. the share of the objective's variance explained by the per-bin means (eta squared) is
//   reduced
//      by the share that noise alone would explain with that many bins, (B-1)/(n-1), and
//      rescaled: max(0, (eta2 - e) / (1 - e)).
// Shares do not sum to 1: the rest is interactions and noise. Returns the parameters in input
// order; all zeros when there are fewer than 4 values or the objective is constant.
std::vector<ParamImportance> MainEffectImportance(const std::vector<ImportanceInput>& params,
                                                  const std::vector<double>& objective);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_REPORT_PARAM_IMPORTANCE_H_
