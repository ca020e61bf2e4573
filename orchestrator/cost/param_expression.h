#ifndef SEXTANT_ORCHESTRATOR_COST_PARAM_EXPRESSION_H_
#define SEXTANT_ORCHESTRATOR_COST_PARAM_EXPRESSION_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sextant {

// An arithmetic expression in a trial's numeric parameters, such as "20 + 0.5 * width" or
// "10 * exp(depth / 4)" (muParser syntax: + - * / ^, comparisons, ?:, sin, exp, log, sqrt,
// min, max, ...). Used by `simulate` for a time per fidelity unit that depends on the
// parameters. Evaluate() is const but not thread-safe (the variables are bound in place).
class ParamExpression {
 public:
  // Parses `text` with `variables` as the only names it may use. InvalidArgument with
  // muParser's message (which names the token and its position) when it does not parse or
  // uses another name.
  static absl::StatusOr<std::unique_ptr<ParamExpression>> Parse(
      const std::string& text, const std::vector<std::string>& variables);
  ~ParamExpression();

  // The value with the variables bound to `values` (a variable not in it is 0). NaN when the
  // evaluation fails (e.g. division by zero is inf, not a failure).
  double Evaluate(const std::map<std::string, double>& values) const;

  const std::string& text() const { return text_; }

 private:
  struct Impl;
  explicit ParamExpression(std::string text);
  std::string text_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_COST_PARAM_EXPRESSION_H_
