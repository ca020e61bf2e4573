#ifndef SEXTANT_ORCHESTRATOR_IMPORT_INTERNAL_YAML_SCALAR_H_
#define SEXTANT_ORCHESTRATOR_IMPORT_INTERNAL_YAML_SCALAR_H_

#include <string>

#include "absl/strings/string_view.h"

namespace sextant {

// Every string the Optuna import takes from a storage and writes into experiment.yaml goes
// through one of these, so that no stored text can end a scalar, a comment or a line and add
// YAML of its own.

// Whether s is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool IsUtf8(absl::string_view s);

// s as the body of a YAML double-quoted scalar, without the quotes: '\\' and '"' escaped,
// every C0 control, DEL and C1 control escaped (\n, \t, \r, ... or \xXX / \uXXXX), and the
// Unicode line breaks U+0085, U+2028 and U+2029 as \uXXXX. Valid UTF-8 otherwise
// passes through unchanged; a byte that is not valid UTF-8 becomes \uFFFD. The result holds
// no byte that any YAML reader takes for a line break, so it may also sit inside a comment.
std::string YamlEscaped(absl::string_view s);

// s as YamlEscaped writes it but with '"' and '\\' left as they are: text for a `#` comment (or
// a terminal), where only line breaks and controls do harm and quotes read better plain.
std::string YamlCommentText(absl::string_view s);

// s as a YAML double-quoted scalar: "YamlEscaped(s)". A YAML loader reads it back as s
// exactly when s is valid UTF-8.
std::string YamlQuoted(absl::string_view s);

// s as a mapping key: plain when it is an identifier ([A-Za-z_][A-Za-z0-9_]*) that YAML does
// not read as null (null, Null, NULL), else YamlQuoted(s).
std::string YamlKey(absl::string_view s);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_IMPORT_INTERNAL_YAML_SCALAR_H_
