#ifndef SEXTANT_ORCHESTRATOR_IMPORT_INTERNAL_PYTHON_JSON_H_
#define SEXTANT_ORCHESTRATOR_IMPORT_INTERNAL_PYTHON_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace sextant {

// JSON as Python's json.dumps writes it, which is how Optuna stores attributes and every line
// of its journal: strict JSON plus the bare words NaN, Infinity and -Infinity for non-finite
// floats.

// The deepest nesting of '[' and '{' outside strings in text (0 for a scalar). Linear, with
// no recursion, so it can be asked of untrusted text before that text is parsed.
int JsonDepth(absl::string_view text);

// Parses text, reading NaN, Infinity and -Infinity (outside strings) as those doubles, and
// keeping the order of each object's keys. Strings must be valid UTF-8. Returns
// InvalidArgument with the parser's message for anything else that is not JSON. The caller
// bounds the text's size and JsonDepth first.
absl::StatusOr<nlohmann::ordered_json> ParsePythonJson(absl::string_view text);

// j as Python's json.dumps writes it (", " and ": " between items, NaN, Infinity and
// -Infinity for non-finite numbers), for keeping a value that strict JSON cannot hold as text.
std::string DumpPythonJson(const nlohmann::ordered_json& j);

// Whether j holds a non-finite number anywhere inside it (depth as bounded by the parser).
bool HoldsNonFinite(const nlohmann::ordered_json& j);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_IMPORT_INTERNAL_PYTHON_JSON_H_
