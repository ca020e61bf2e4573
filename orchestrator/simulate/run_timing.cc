#include "orchestrator/simulate/run_timing.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"

namespace sextant {

absl::StatusOr<RunTiming> MeasureRunTiming(const std::vector<RoundRow>& rows) {
  std::map<int64_t, double> closes;
  for (const RoundRow& r : rows) {
    if (r.region.empty()) closes[r.round] = r.time;
  }
  std::vector<double> gaps;
  for (auto it = closes.begin(); it != closes.end(); ++it) {
    auto next = std::next(it);
    if (next != closes.end() && next->first == it->first + 1) {
      gaps.push_back(next->second - it->second);
    }
  }
  if (gaps.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "it closed ", closes.size(), " rounds and no two in a row; a round's time needs two"));
  }
  std::sort(gaps.begin(), gaps.end());
  const size_t n = gaps.size();
  RunTiming t;
  t.round_seconds = n % 2 == 1 ? gaps[n / 2] : (gaps[n / 2 - 1] + gaps[n / 2]) / 2;
  t.startup_seconds = std::max(0.0, closes.begin()->second - t.round_seconds);
  t.gaps = static_cast<int64_t>(n);
  return t;
}

absl::StatusOr<RunTiming> MeasureRunTiming(const std::string& run_dir) {
  const std::string db = (std::filesystem::path(run_dir) / "state.db").string();
  std::error_code ec;
  if (!std::filesystem::exists(db, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(run_dir, ": no run state (", db, ")"));
  }
  absl::StatusOr<RoundsTable> table = RoundsTable::OpenReadOnly(db);
  if (!table.ok())
    return absl::InvalidArgumentError(absl::StrCat(run_dir, ": ", table.status().message()));
  absl::StatusOr<std::vector<RoundRow>> rows = table->Load();
  if (!rows.ok())
    return absl::InvalidArgumentError(absl::StrCat(run_dir, ": ", rows.status().message()));
  absl::StatusOr<RunTiming> t = MeasureRunTiming(*rows);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(run_dir, ": ", t.status().message()));
  return t;
}

}  // namespace sextant
