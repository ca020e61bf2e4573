#ifndef SEXTANT_COMMON_DURATION_H_
#define SEXTANT_COMMON_DURATION_H_

#include <string>

#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace sextant {

// Parses a duration such as "90", "90s", "10m", "2h", "1h30m" or "250ms" into seconds.
// A bare number means seconds. Returns InvalidArgument for anything else, or a negative value.
absl::StatusOr<double> ParseDurationSeconds(absl::string_view text);

// Formats seconds compactly for people: "0:42", "12:05", "3:02:11".
std::string FormatClock(double seconds);

}  // namespace sextant

#endif  // SEXTANT_COMMON_DURATION_H_
