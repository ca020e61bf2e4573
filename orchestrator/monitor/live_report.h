#ifndef SEXTANT_ORCHESTRATOR_MONITOR_LIVE_REPORT_H_
#define SEXTANT_ORCHESTRATOR_MONITOR_LIVE_REPORT_H_

#include <atomic>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace sextant {

struct LiveReportOptions {
  // A page made less than this long ago is served again instead of loading the store anew,
  // so that a busy page cannot load the run; default 2 s.
  absl::Duration max_age = absl::Seconds(2);
  // How often the page reloads itself while the run goes on; default 5 s.
  int refresh_seconds = 5;
};

// The HTML report of a run that is going on, as the live page (`/` of --metrics-port) serves
// it: the report `sextant report` writes, from a read-only load of the run directory, which
// reloads itself until the run has ended.
// Thread-safe: Page may be called from several threads (one loads, the others wait for it).
class LiveReport {
 public:
  // run_dir and clock (which must outlive this) are the run's.
  LiveReport(std::string run_dir, Clock* clock, LiveReportOptions options = {});

  // The page: cached while younger than max_age, else made afresh. NotFound when the run
  // directory holds no run yet, Internal on a store error or a failure to render.
  absl::StatusOr<std::string> Page() ABSL_LOCKS_EXCLUDED(mu_);

  // The run has ended (its final state is stored): pages made from now on no longer reload
  // or say that the run is in progress, and the cached page is dropped.
  void RunEnded() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::StatusOr<std::string> Make();

  const std::string run_dir_;
  Clock* const clock_;
  const LiveReportOptions options_;
  std::atomic<bool> ended_{false};
  absl::Mutex mu_;
  std::string page_ ABSL_GUARDED_BY(mu_);
  absl::Time made_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_MONITOR_LIVE_REPORT_H_
