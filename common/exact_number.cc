#include "common/exact_number.h"

#include <charconv>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace sextant {

std::string ExactNumber(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  // std::to_chars without a precision gives the shortest text that round-trips.
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  if (ec != std::errc()) return absl::StrFormat("%.17g", v);
  return std::string(buf, end);
}

std::string UnixSecondsText(double unix_seconds) { return absl::StrFormat("%.6f", unix_seconds); }

std::optional<double> ParseUnixSeconds(absl::string_view text) {
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v)) return std::nullopt;
  // A present-day time needs 10 digits before the point; "1.79636e+09" has 6 in all.
  int digits = 0;
  for (char c : text) {
    if (c == 'e' || c == 'E') break;
    if (c >= '0' && c <= '9') ++digits;
  }
  if (std::fabs(v) >= 1e9 && digits < 10) return std::nullopt;
  return v;
}

}  // namespace sextant
