#ifndef SEXTANT_COMMON_ERROR_LINE_H_
#define SEXTANT_COMMON_ERROR_LINE_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace sextant {

// An error of several lines (a command's exit and the tail of its stderr) as one console line:
// its first line, then its last non-empty line, where a traceback names its cause
// ("client command exited with status 1; stderr: Traceback ... | ModuleNotFoundError: ...").
// Cut to at most max_bytes (at least 16), ending in "...".
std::string ErrorLine(absl::string_view error, size_t max_bytes = 300);

}  // namespace sextant

#endif  // SEXTANT_COMMON_ERROR_LINE_H_
