#include "common/error_line.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace sextant {

std::string ErrorLine(absl::string_view error, size_t max_bytes) {
  max_bytes = std::max<size_t>(max_bytes, 16);
  std::string first, last;
  bool first_seen = false;
  for (absl::string_view line : absl::StrSplit(error, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!first_seen) {
      first = std::string(line);
      first_seen = true;
    } else if (!line.empty()) {
      last = std::string(line);
    }
  }
  std::string out = last.empty() ? first : absl::StrCat(first, " | ", last);
  if (out.size() > max_bytes) out = out.substr(0, max_bytes - 3) + "...";
  return out;
}

}  // namespace sextant
