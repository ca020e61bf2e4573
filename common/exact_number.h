#ifndef SEXTANT_COMMON_EXACT_NUMBER_H_
#define SEXTANT_COMMON_EXACT_NUMBER_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace sextant {

// The shortest decimal text that reads back as exactly v ("0.1", "-3.274409774458036",
// "1e+300"); "nan", "inf" and "-inf" for the non-finite values. Unlike absl::StrCat(double),
// which keeps 6 significant digits, nothing is rounded away.
std::string ExactNumber(double v);

// A time in unix seconds as fixed-point text with microseconds ("1796360123.456789"): what the
// store keeps for the run's start and end, exact to the microsecond.
std::string UnixSecondsText(double unix_seconds);

// Reads a time written by UnixSecondsText. nullopt when the text is not a number, or when it
// was written with fewer than 10 significant digits (as "1.79636e+09" was by older versions),
// which cannot name its second: the caller derives the time anew.
std::optional<double> ParseUnixSeconds(absl::string_view text);

}  // namespace sextant

#endif  // SEXTANT_COMMON_EXACT_NUMBER_H_
