#ifndef SEXTANT_ORCHESTRATOR_SEARCH_PROGRESS_H_
#define SEXTANT_ORCHESTRATOR_SEARCH_PROGRESS_H_

#include <ostream>
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
  // Shows the latest stats (rate-limited).
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
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SEARCH_PROGRESS_H_
