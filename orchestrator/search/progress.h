#ifndef SEXTANT_ORCHESTRATOR_SEARCH_PROGRESS_H_
#define SEXTANT_ORCHESTRATOR_SEARCH_PROGRESS_H_

#include <cstdint>
#include <ostream>
#include <set>
#include <string>

#include "common/clock.h"
#include "orchestrator/core/dispatcher.h"

namespace sextant {

// Shows a run's progress. On a TTY it redraws one line in place (bar, trials done of total,
// best so far, elapsed, ETA); otherwise it prints a plain line at most every
// plain_interval_seconds, and at the end. Not thread-safe; runs on the orchestrator loop.
class ProgressReporter {
 public:
  ProgressReporter(std::ostream* out, bool tty, Clock* clock, std::string metric,
                   double plain_interval_seconds = 5);
  // Takes the failures a resumed run already had as shown (call before the first Update).
  void Resumed(const DispatchStats& stats) {
    for (const auto& failure : stats.recent_failures) shown_failures_.insert(failure.first);
  }
  // Shows the latest stats (rate-limited); a trial that failed since the last call gets a
  // line of its own with its error.
  void Update(const DispatchStats& stats);
  // Shows the final stats and ends the line.
  void Finish(const DispatchStats& stats);

  // The text of one progress line, e.g.
  // "[#####-----] 12/30 trials  best loss=0.412 (#7)  elapsed 0:12  eta 0:18".
  static std::string Line(const DispatchStats& stats, const std::string& metric, double elapsed,
                          bool with_bar);

 private:
  std::ostream* out_;
  bool tty_;
  Clock* clock_;
  std::string metric_;
  double plain_interval_;
  absl::Time start_;
  absl::Time last_draw_ = absl::InfinitePast();
  int last_finished_ = -1;
  std::set<int64_t> shown_failures_;  // trials whose failure has had its line
  // Prints a line for each trial in stats.recent_failures not shown yet, with its error.
  void ShowNewFailures(const DispatchStats& stats);
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SEARCH_PROGRESS_H_
