#include "aggregator/version_starts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/ids.h"

namespace sextant {
namespace {

constexpr int kReleaseGaps = 3;
constexpr absl::Duration kMinRelease = absl::Seconds(10);

}  // namespace

void VersionStarts::Published(int64_t version, absl::Time now) {
  if (version == version_) return;
  if (version_ >= 0 && now > published_at_)
    longest_gap_ = std::max(longest_gap_, now - published_at_);
  version_ = version;
  published_at_ = now;
  started_.clear();
}

void VersionStarts::Ask(const std::string& participant, int64_t after) {
  if (cap_ <= 0) return;
  asks_[participant] = after;
  training_.erase(participant);
}

bool VersionStarts::Admit(const std::string& participant, int64_t version, absl::Time now) {
  if (cap_ <= 0 || version != version_) return true;
  if (started_.count(participant)) {
    training_.insert(participant);
    return true;
  }
  const bool released = now - published_at_ > std::max(kMinRelease, kReleaseGaps * longest_gap_);
  const int64_t free = cap_ - static_cast<int64_t>(started_.size());
  int64_t ahead = 0;
  if (!released) {
    const uint64_t mine = Draw(participant, version);
    for (const auto& [other, after] : asks_) {
      if (other == participant || after >= version || training_.count(other) ||
          started_.count(other)) {
        continue;
      }
      const uint64_t theirs = Draw(other, version);
      if (theirs < mine || (theirs == mine && other < participant)) ++ahead;
    }
  }
  if (!released && ahead >= free) return false;
  started_.insert(participant);
  training_.insert(participant);
  return true;
}

uint64_t VersionStarts::Draw(const std::string& participant, int64_t version) const {
  return HashId(absl::StrCat(seed_, "/", version, "/", participant));
}

}  // namespace sextant
