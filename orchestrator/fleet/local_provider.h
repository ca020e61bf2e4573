#ifndef SEXTANT_ORCHESTRATOR_FLEET_LOCAL_PROVIDER_H_
#define SEXTANT_ORCHESTRATOR_FLEET_LOCAL_PROVIDER_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>

#include "orchestrator/core/local_launcher.h"
#include "absl/strings/str_cat.h"
#include "orchestrator/fleet/provider.h"

namespace sextant {

// Instances are `sextant-worker` processes on this machine, one per instance, started with
// `--connect --region --pool --launch-token --exit-with-parent`. Interrupt sends SIGTERM (the
// worker's preemption notice) or SIGKILL (no notice). Not thread-safe.
class LocalProvider : public Provider {
 public:
  // launcher is not owned and must outlive the provider. worker_binary is the path of
  // `sextant-worker`.
  LocalProvider(ProcessLauncher* launcher, std::string worker_binary);

  const char* name() const override { return "local"; }
  std::string Label(const std::string& handle) const override {
    return absl::StrCat("pid=", handle);
  }
  // Returns the pid as text; Internal when the process cannot start.
  absl::StatusOr<std::string> Launch(const InstanceRequest& request) override;
  // SIGINT: the worker stops taking work and exits.
  absl::Status Terminate(const std::string& handle) override;
  // Running until the process exits (it is reaped here), then Gone with its exit status.
  InstanceStatus Poll(const std::string& handle) override;
  absl::Status Interrupt(const std::string& handle, bool notice) override;

  // Sends SIGKILL to every process still running (the end of a run).
  void KillAll();

 private:
  ProcessLauncher* launcher_;
  std::string worker_binary_;
  std::map<pid_t, std::string> exited_;  // reaped pid -> how it ended
  std::map<pid_t, bool> live_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FLEET_LOCAL_PROVIDER_H_
