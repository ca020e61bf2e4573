#ifndef SEXTANT_ORCHESTRATOR_SEARCH_LOCAL_WORKERS_H_
#define SEXTANT_ORCHESTRATOR_SEARCH_LOCAL_WORKERS_H_

#include <sys/types.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "orchestrator/core/local_launcher.h"

namespace sextant {

// The worker processes a search starts on this host: each launched with its index's command
// line and log, reaped when it exits, and replaced while the run goes on, a bounded number of
// times. Not thread-safe.
class LocalWorkers {
 public:
  // argv(index): the command line of worker index, whose log is logs_dir/worker-INDEX.log.
  // Failures to replace a worker are written to err.
  LocalWorkers(ProcessLauncher* launcher, std::function<std::vector<std::string>(int)> argv,
               std::string logs_dir, std::ostream* err)
      : launcher_(launcher), argv_(std::move(argv)), logs_dir_(std::move(logs_dir)), err_(err) {}

  // Starts worker index.
  absl::Status Launch(int index);
  // Reaps the workers that exited; with replace, starts one anew in place of an exited one
  // while respawns are left (at most one per call).
  void Reap(bool replace);
  // How many exited workers may still be replaced.
  void AllowRespawns(int n) { respawns_left_ = n; }
  // Sends sig to every worker still running.
  void Signal(int sig);
  int size() const { return static_cast<int>(workers_.size()); }
  bool empty() const { return workers_.empty(); }

 private:
  struct Local {
    pid_t pid;
    int index;
  };
  ProcessLauncher* launcher_;
  std::function<std::vector<std::string>(int)> argv_;
  std::string logs_dir_;
  std::ostream* err_;
  std::vector<Local> workers_;
  int respawns_left_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SEARCH_LOCAL_WORKERS_H_
