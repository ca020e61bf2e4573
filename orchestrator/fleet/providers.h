#ifndef SEXTANT_ORCHESTRATOR_FLEET_PROVIDERS_H_
#define SEXTANT_ORCHESTRATOR_FLEET_PROVIDERS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/fleet/provider.h"

namespace sextant {

struct ProviderOptions {
  std::string worker_binary;          // sextant-worker, here and on Slurm's nodes; required
  ProcessLauncher* launcher = nullptr;  // local: starts the processes; not owned
  std::string slurm_partition;        // slurm: on-demand and reserved jobs; default: Slurm's
  std::string slurm_spot_partition;   // slurm: spot jobs; default: slurm_partition
};

// The provider that resources.provider names: "local" (or empty: processes on this machine),
// "static" (started by hand) or "slurm". InvalidArgument for "simulated", which only
// `sextant simulate` runs, and for any other name. The launcher must outlive the provider.
absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(const std::string& kind,
                                                       const ProviderOptions& options);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FLEET_PROVIDERS_H_
