#include "orchestrator/fleet/providers.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "orchestrator/fleet/local_provider.h"
#include "orchestrator/fleet/slurm_provider.h"
#include "orchestrator/fleet/static_provider.h"

namespace sextant {

absl::StatusOr<std::unique_ptr<Provider>> MakeProvider(const std::string& kind,
                                                       const ProviderOptions& options) {
  if (kind == "static") return std::make_unique<StaticProvider>();
  if (kind == "slurm") {
    return std::make_unique<SlurmProvider>(SlurmOptions{
        options.worker_binary, options.slurm_partition, options.slurm_spot_partition, ""});
  }
  if (kind == "local" || kind.empty()) {
    return std::make_unique<LocalProvider>(options.launcher, options.worker_binary);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("provider ", kind, " runs only under `sextant simulate`"));
}

}  // namespace sextant
