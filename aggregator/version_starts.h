// Buffered rounds with federation.clients_per_round below every client (FedBuff's concurrency):
// how many participants start training on each model version, and which.
#ifndef SEXTANT_AGGREGATOR_VERSION_STARTS_H_
#define SEXTANT_AGGREGATOR_VERSION_STARTS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/time/time.h"

namespace sextant {

// At most `cap` participants start on each model version. Which ones is a seeded draw per
// version among the participants free to start (those that asked for a version above their
// last and are not training: not admitted since they last asked), not the order in which their
// calls happen to be polled, so that over the versions every client takes part alike, as a
// synchronous round's random sample does; and as only `cap` of them train on a version, a
// buffer of at most `cap` updates is computed from the version it is applied to, not the one
// before it. A participant admitted to a version is admitted to it again (it trains on it once
// more when no newer one comes), and the cap lifts from a version that has been out for 3 times
// the longest gap between two versions (at least 10 s), so that a participant that is gone
// never holds a version's places, nor its turn in the draw, for ever. Not thread-safe: the
// hub's lock guards it.
class VersionStarts {
 public:
  // cap 0: no limit (every call is admitted). seed: the draws' (one run's are its own).
  explicit VersionStarts(int64_t cap = 0, uint64_t seed = 0) : cap_(cap), seed_(seed) {}

  // Version `version` is out from `now`.
  void Published(int64_t version, absl::Time now);
  // `participant` asks for a version above `after`: it is free to start on one (no longer
  // training), and takes part in the draw of every version above `after`.
  void Ask(const std::string& participant, int64_t after);
  // Whether `participant`, which asked, may start on `version` (the newest, above what it asked
  // after) at `now`: a place is free, and no participant free to start draws before it.
  bool Admit(const std::string& participant, int64_t version, absl::Time now);

 private:
  uint64_t Draw(const std::string& participant, int64_t version) const;

  int64_t cap_;
  uint64_t seed_;
  int64_t version_ = -1;
  absl::Time published_at_ = absl::InfinitePast();
  absl::Duration longest_gap_ = absl::ZeroDuration();
  std::set<std::string> started_;        // on version_
  std::map<std::string, int64_t> asks_;  // participant -> the version it last asked to be above
  std::set<std::string> training_;       // admitted, and not asked since
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_VERSION_STARTS_H_
