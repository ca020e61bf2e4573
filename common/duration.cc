#include "common/duration.h"

#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sextant {

absl::StatusOr<double> ParseDurationSeconds(absl::string_view text) {
  double bare = 0;
  if (absl::SimpleAtod(text, &bare)) {
    if (!(bare >= 0) || !std::isfinite(bare)) {
      return absl::InvalidArgumentError(absl::StrCat("duration must be >= 0, got ", text));
    }
    return bare;
  }
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid duration '", text, "' (use e.g. 30s, 10m, 2h, 1h30m)"));
  }
  return absl::ToDoubleSeconds(d);
}

std::string FormatClock(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  long s = std::lround(seconds);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

}  // namespace sextant
