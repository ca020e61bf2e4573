#ifndef SEXTANT_ORCHESTRATOR_FLEET_STATIC_PROVIDER_H_
#define SEXTANT_ORCHESTRATOR_FLEET_STATIC_PROVIDER_H_

#include <string>

#include "orchestrator/fleet/provider.h"

namespace sextant {

// Workers started by hand anywhere: `sextant-worker --connect HOST:PORT --region R --pool P`.
// The orchestrator launches nothing; the fleet adopts each worker that registers with a pool
// name as an instance of that pool and bills it from registration to the end of the run.
// Not thread-safe.
class StaticProvider : public Provider {
 public:
  const char* name() const override { return "static"; }
  bool launches() const override { return false; }
  // Always FailedPrecondition, naming the command to start a worker by hand.
  absl::StatusOr<std::string> Launch(const InstanceRequest& request) override {
    return absl::FailedPreconditionError(
        absl::StrCat("pool ", request.pool,
                     " is static: start its workers by hand with `sextant-worker --connect ",
                     request.connect, " --region ", request.region, " --pool ", request.pool, "`"));
  }
  // Nothing to do: a hand-started worker is told `done` by the orchestrator and exits.
  absl::Status Terminate(const std::string&) override { return absl::OkStatus(); }
  // Running: a hand-started worker's life is seen only through its leases.
  InstanceStatus Poll(const std::string&) override { return InstanceStatus::Running(); }
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FLEET_STATIC_PROVIDER_H_
