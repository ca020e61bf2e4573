#ifndef SEXTANT_ORCHESTRATOR_CORE_LOCAL_LAUNCHER_H_
#define SEXTANT_ORCHESTRATOR_CORE_LOCAL_LAUNCHER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sextant {

// Starts and stops processes: the orchestrator's only way to launch workers, so that tests
// can substitute their own. Not thread-safe.
class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts argv (argv[0] a path) with stdout and stderr appended to log_path (created 0600 as
  // the umask allows, never through a symbolic link). Returns the pid, or Internal when it
  // cannot start (log_path a link included).
  virtual absl::StatusOr<pid_t> Launch(const std::vector<std::string>& argv,
                                       const std::string& log_path) = 0;
  // Sends sig to pid; a pid that is gone is not an error.
  virtual void Signal(pid_t pid, int sig) = 0;
  // Returns the wait status if pid has exited (reaping it), nullopt while it runs.
  virtual std::optional<int> Poll(pid_t pid) = 0;
};

// Real processes, via posix_spawn.
std::unique_ptr<ProcessLauncher> NewPosixProcessLauncher();

// The path of the program `name` in this binary's folder (/proc/self/exe's; "." when that
// cannot be read), e.g. BinaryBesideThisOne("sextant-worker").
std::string BinaryBesideThisOne(const std::string& name);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_LOCAL_LAUNCHER_H_
