#include "orchestrator/cost/param_expression.h"

#include <muParser.h>

#include <limits>

#include "absl/strings/str_cat.h"

namespace sextant {

struct ParamExpression::Impl {
  mu::Parser parser;
  std::vector<std::string> names;
  std::vector<double> slots;  // the bound variables; sized once, so the pointers stay valid
};

ParamExpression::ParamExpression(std::string text)
    : text_(std::move(text)), impl_(std::make_unique<Impl>()) {}

ParamExpression::~ParamExpression() = default;

absl::StatusOr<std::unique_ptr<ParamExpression>> ParamExpression::Parse(
    const std::string& text, const std::vector<std::string>& variables) {
  std::unique_ptr<ParamExpression> e(new ParamExpression(text));
  Impl& impl = *e->impl_;
  impl.names = variables;
  impl.slots.assign(variables.size(), 0.0);
  try {
    for (size_t i = 0; i < variables.size(); ++i)
      impl.parser.DefineVar(variables[i], &impl.slots[i]);
    impl.parser.SetExpr(text);
    impl.parser.Eval();  // parses now, so that an unknown name is an error here
  } catch (const mu::Parser::exception_type& ex) {
    return absl::InvalidArgumentError(absl::StrCat("expression '", text, "': ", ex.GetMsg()));
  }
  return e;
}

double ParamExpression::Evaluate(const std::map<std::string, double>& values) const {
  for (size_t i = 0; i < impl_->names.size(); ++i) {
    auto it = values.find(impl_->names[i]);
    impl_->slots[i] = it == values.end() ? 0.0 : it->second;
  }
  try {
    return impl_->parser.Eval();
  } catch (const mu::Parser::exception_type&) {
    return std::numeric_limits<double>::quiet_NaN();
  }
}

}  // namespace sextant
