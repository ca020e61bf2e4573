#include "orchestrator/fleet/providers.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "orchestrator/cost/federated_placement.h"
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

absl::StatusOr<std::unique_ptr<Provider>> MakePoolsProvider(const v1::Resources& resources,
                                                            const ProviderOptions& options) {
  std::set<std::string> kinds;
  for (const v1::Pool& p : resources.pools()) kinds.insert(PoolProvider(resources, p));
  if (kinds.size() <= 1) {
    return MakeProvider(kinds.empty() ? resources.provider() : *kinds.begin(), options);
  }
  // One provider of each kind, shared by its pools (a local provider's children, say).
  std::map<std::string, std::shared_ptr<Provider>> made;
  for (const std::string& kind : kinds) {
    absl::StatusOr<std::unique_ptr<Provider>> p = MakeProvider(kind, options);
    if (!p.ok()) return p.status();
    made[kind] = std::shared_ptr<Provider>(*std::move(p));
  }
  std::map<std::string, std::shared_ptr<Provider>> of_pool;
  for (const v1::Pool& p : resources.pools()) of_pool[p.name()] = made[PoolProvider(resources, p)];
  return std::make_unique<PoolProviders>(std::move(of_pool));
}

namespace {

// A PoolProviders handle: its provider's index in providers_, ':', that provider's own handle.
constexpr char kSeparator = ':';

}  // namespace

PoolProviders::PoolProviders(std::map<std::string, std::shared_ptr<Provider>> of_pool)
    : of_pool_(std::move(of_pool)) {
  for (const auto& [pool, p] : of_pool_) {
    if (std::find(providers_.begin(), providers_.end(), p.get()) == providers_.end()) {
      providers_.push_back(p.get());
    }
  }
}

bool PoolProviders::launches() const {
  return std::all_of(of_pool_.begin(), of_pool_.end(),
                     [](const auto& e) { return e.second->launches(); });
}

bool PoolProviders::Launches(const std::string& pool) const {
  auto it = of_pool_.find(pool);
  return it != of_pool_.end() && it->second->Launches(pool);
}

absl::StatusOr<std::string> PoolProviders::Launch(const InstanceRequest& request) {
  auto it = of_pool_.find(request.pool);
  if (it == of_pool_.end()) {
    return absl::FailedPreconditionError(absl::StrCat("no provider for pool '", request.pool, "'"));
  }
  absl::StatusOr<std::string> handle = it->second->Launch(request);
  if (!handle.ok()) return handle.status();
  const auto index = std::find(providers_.begin(), providers_.end(), it->second.get());
  return absl::StrCat(index - providers_.begin(), std::string(1, kSeparator), *handle);
}

std::pair<Provider*, std::string> PoolProviders::Route(const std::string& handle) const {
  const size_t at = handle.find(kSeparator);
  if (at == std::string::npos) return {nullptr, ""};
  size_t index = 0;
  if (!absl::SimpleAtoi(handle.substr(0, at), &index) || index >= providers_.size()) {
    return {nullptr, ""};
  }
  return {providers_[index], handle.substr(at + 1)};
}

absl::Status PoolProviders::Terminate(const std::string& handle) {
  auto [provider, own] = Route(handle);
  return provider ? provider->Terminate(own) : absl::OkStatus();
}

InstanceStatus PoolProviders::Poll(const std::string& handle) {
  auto [provider, own] = Route(handle);
  return provider ? provider->Poll(own) : InstanceStatus::Gone("unknown instance");
}

absl::Status PoolProviders::Interrupt(const std::string& handle, bool notice) {
  auto [provider, own] = Route(handle);
  if (provider == nullptr) return absl::NotFoundError(absl::StrCat("no instance ", handle));
  return provider->Interrupt(own, notice);
}

std::string PoolProviders::Label(const std::string& handle) const {
  auto [provider, own] = Route(handle);
  return provider ? provider->Label(own) : Provider::Label(handle);
}

}  // namespace sextant
