#ifndef SEXTANT_ORCHESTRATOR_FLEET_PROVIDERS_H_
#define SEXTANT_ORCHESTRATOR_FLEET_PROVIDERS_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/fleet/provider.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

struct ProviderOptions {
  std::string worker_binary;            // sextant-worker, here and on Slurm's nodes; required
  ProcessLauncher* launcher = nullptr;  // local: starts the processes; not owned
  std::string slurm_partition;          // slurm: on-demand and reserved jobs; default: Slurm's
  std::string slurm_spot_partition;     // slurm: spot jobs; default: slurm_partition
};

// The provider that resources.provider names: "local" (or empty: processes on this machine),
// "static" (started by hand) or "slurm". InvalidArgument for "simulated", which only
// `sextant simulate` runs, and for any other name. The launcher must outlive the provider.
absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(const std::string& kind,
                                                       const ProviderOptions& options);

// The providers of `resources`' pools (each pool's own, else resources.provider), as one:
// the provider itself when every pool uses the same one (or there are none), else a
// PoolProviders that routes each request by its pool. InvalidArgument as MakeProvider.
absl::StatusOr<std::unique_ptr<Provider>> MakePoolsProvider(const v1::Resources& resources,
                                                            const ProviderOptions& options);

// Pools on different providers (a region on Slurm, another on static hosts): each request goes
// to its pool's provider, and each handle back to the provider that gave it. launches() is
// false when any pool is started by hand. Not thread-safe, as every provider.
class PoolProviders : public Provider {
 public:
  // `of_pool` maps every pool name to its provider (pools may share one), owned here.
  explicit PoolProviders(std::map<std::string, std::shared_ptr<Provider>> of_pool);

  const char* name() const override { return "pools"; }
  bool launches() const override;
  bool Launches(const std::string& pool) const override;
  // FailedPrecondition for a pool it does not know.
  absl::StatusOr<std::string> Launch(const InstanceRequest& request) override;
  absl::Status Terminate(const std::string& handle) override;
  InstanceStatus Poll(const std::string& handle) override;
  absl::Status Interrupt(const std::string& handle, bool notice) override;
  std::string Label(const std::string& handle) const override;

 private:
  // The provider that gave `handle` and its own handle for it; null when unknown.
  std::pair<Provider*, std::string> Route(const std::string& handle) const;

  std::map<std::string, std::shared_ptr<Provider>> of_pool_;
  std::vector<Provider*> providers_;  // of of_pool_, each once
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FLEET_PROVIDERS_H_
