#ifndef SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_SPACE_H_
#define SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_SPACE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "orchestrator/import/optuna_storage.h"
#include "strategies/search_space.h"

namespace sextant {

// One Sextant parameter made from the distributions an Optuna study used for one name.
struct ImportedParameter {
  std::string name;         // the Sextant name: the Optuna name with [^A-Za-z0-9_] as '_'
  std::string optuna_name;  // as Optuna stored it
  OptunaDistribution::Kind kind = OptunaDistribution::Kind::kFloat;
  double min = 0, max = 0;  // float and int: the union of the trials' ranges
  bool log = false;         // float and int: every distribution was log
  // float and int: the step every distribution shares (Optuna's step, or q of the legacy
  // DiscreteUniformDistribution), on a grid that the distributions' lows agree on; nullopt
  // for none (an int's step 1) or when they differ (noted).
  std::optional<double> step;
  std::vector<std::string> values;  // categorical: choices as Python's str(), first seen first
  std::map<std::string, std::string> when;  // an inferred condition (parent -> value)
  std::vector<std::string> notes;           // what did not map one to one, for the YAML comment
  nlohmann::json distributions = nlohmann::json::array();  // the distinct stored distributions
  std::vector<int64_t> absent_in;  // numbers of the finished trials without it
};

// The space of a study and each trial's parameters in it.
struct ImportedSpace {
  std::vector<ImportedParameter> parameters;  // in order of first suggestion
  // Parameters with a single possible value (low == high, or one choice): not searchable in
  // Sextant (min < max, two values at least), so left out of the space and of the trials'
  // params; {optuna name: {"value": v, "distribution": d}}.
  nlohmann::json constants = nlohmann::json::object();
  std::vector<Params> trial_params;  // by index into study.trials; empty for WAITING trials
};

// The most parameters x trials InferOptunaSpace accepts (10^8: 100 parameters of a million
// trials), so that its passes over every parameter of every trial stay bounded.
inline constexpr int64_t kMaxOptunaCells = 100'000'000;

// Infers the space (conditions included) from every trial's parameters. The rules, in
// docs/ask-tell.md "Importing Optuna studies": kinds must agree across trials; ranges are united;
// a step is kept when every trial's distribution has the same one on the same grid (else
// dropped, noted); a parameter missing from some COMPLETE trial gets `when: {C: v}`
// when an earlier int or categorical parameter C has the value v in every trial that has it
// and every COMPLETE trial with C = v has it, and otherwise stays unconditional with the
// trials that lack it recorded in absent_in. Returns InvalidArgument naming the parameter when
// its kind changes between trials, two choices print the same, two names sanitise alike, a
// choice is not a JSON scalar, or the study has more than kMaxParameters parameters or more
// than kMaxOptunaCells parameters x trials. The search for conditions has a fixed budget; a
// parameter it cannot settle within it stays unconditional (noted).
absl::StatusOr<ImportedSpace> InferOptunaSpace(const OptunaStudy& study);

// The parameters an enqueued (WAITING) trial was given (its system attribute "fixed_params",
// in Optuna's external form), mapped into the space. Returns InvalidArgument naming a
// parameter the space lacks, a value of the wrong type, or an unconditional parameter the
// trial does not fix (Sextant cannot sample the rest of an enqueued trial).
absl::StatusOr<Params> FixedParams(const ImportedSpace& space, const nlohmann::json& fixed);

// A categorical choice as Python's str() prints it: strings verbatim, None, True, False,
// integers in decimal and floats as repr() does (shortest round trip: "0.1", "1e-05", "2.0").
// InvalidArgument for a list or an object.
absl::StatusOr<std::string> PythonStr(const nlohmann::json& choice);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_IMPORT_OPTUNA_SPACE_H_
