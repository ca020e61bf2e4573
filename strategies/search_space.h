#ifndef SEXTANT_STRATEGIES_SEARCH_SPACE_H_
#define SEXTANT_STRATEGIES_SEARCH_SPACE_H_

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "absl/types/span.h"

namespace sextant {

// One dimension of a search space. A plain value type; the orchestrator builds it from the
// experiment file's `parameters:` block.
struct ParamSpec {
  enum class Kind { kFloat, kInt, kCategorical };
  std::string name;
  Kind kind = Kind::kFloat;
  double min = 0;  // float and int: inclusive bounds
  double max = 1;
  bool log = false;  // float and int: sample uniformly in log space (min > 0)
  // float and int: values lie on min + k*step (k = 0, 1, ...), never above max; each such
  // value has equal mass. 0 (the default) = none, an int's step then being 1. A step other
  // than an int's 1 takes precedence over log.
  double step = 0;
  std::vector<std::string> values;  // categorical
  int grid_points = 0;              // grid sampler, float: 0 = default (5)
  // Active only when each named parameter has the given value (its formatted value).
  std::map<std::string, std::string> when;
};

// A parameter value: double for floats, int64_t for ints, std::string for categoricals.
using ParamValue = std::variant<double, int64_t, std::string>;
// A trial's parameters, by name. Inactive conditional parameters are absent.
using Params = std::map<std::string, ParamValue>;

struct SearchSpace {
  std::vector<ParamSpec> params;
  // Returns the index of the parameter called name, or -1.
  int IndexOf(const std::string& name) const;
};

// Maps u in [0,1) to the parameter's domain: linear or log for floats; integers in
// [min, max] with equal mass each; with a step, the values min + k*step (<= max) with equal
// mass each; categoricals by equal slices. u outside [0,1) is clamped.
ParamValue FromUnit(const ParamSpec& spec, double u);

// Maps a value back to [0,1] (the inverse of FromUnit, at the centre of an int or category
// slice). Returns 0.5 for a value of the wrong type.
double ToUnit(const ParamSpec& spec, const ParamValue& value);

// Decodes one point of the unit cube (u.size() == space.params.size()) into Params,
// leaving out conditional parameters whose conditions do not hold.
Params FromUnitCube(const SearchSpace& space, absl::Span<const double> u);

// True when spec's `when` conditions hold in params.
bool IsActive(const ParamSpec& spec, const Params& params);

// One way a set of parameters does not fit a search space.
struct ParamProblem {
  enum class Kind {
    kUnknown,   // not a parameter of the space
    kMissing,   // an active parameter without a value
    kInactive,  // a value for a conditional parameter whose conditions do not hold
    kOutside,   // of the wrong type, or outside the parameter's bounds or values
  };
  std::string param;
  Kind kind = Kind::kUnknown;
  std::string message;  // says why, naming the parameter, e.g. "width: 512 is above max 256"
};

// Every problem with params as one point of space (empty when it fits): names that are not
// parameters, active parameters without a value, values for inactive ones, and values of the
// wrong type (an int parameter takes only int64_t), out of their bounds or values, or off their
// step's grid (a float within a billionth of a step of it counts as on it). In the
// space's parameter order, unknown names last.
std::vector<ParamProblem> CheckParams(const SearchSpace& space, const Params& params);

// Formats a value the way it appears in commands and conditions: floats with up to 17
// significant digits ("0.001", "3.5"), ints in decimal, categories verbatim.
std::string FormatParamValue(const ParamValue& value);

}  // namespace sextant

#endif  // SEXTANT_STRATEGIES_SEARCH_SPACE_H_
