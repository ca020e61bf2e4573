#include "aggregator/tier.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace sextant {
namespace {
constexpr absl::Duration kPoll = absl::Milliseconds(200);
}  // namespace

Tier::Tier(TierOptions options, Clock* clock, std::unique_ptr<FederationHub> hub)
    : options_(std::move(options)), clock_(clock), hub_(std::move(hub)), gate_(options_.policy) {}

Tier::~Tier() {
  if (server_) Shutdown(absl::ZeroDuration());
}

absl::StatusOr<std::unique_ptr<Tier>> Tier::Start(TierOptions options, Clock* clock) {
  absl::StatusOr<RoundCoordinator> coordinator =
      RoundCoordinator::Create(options.coordinator, clock);
  if (!coordinator.ok()) return coordinator.status();
  auto hub = std::make_unique<FederationHub>(*std::move(coordinator), clock, options.stall_timeout);
  std::unique_ptr<Tier> tier(new Tier(std::move(options), clock, std::move(hub)));
  TierOptions& o = tier->options_;
  if (o.secure) {
    o.secagg.experiment_id = o.coordinator.experiment_id;
    tier->secagg_ = std::make_unique<SecAggHub>(o.secagg, clock);
  }
  tier->service_ = std::make_unique<FederationServiceImpl>(tier->hub_.get(), o.chunk_floats,
                                                           tier->secagg_.get(), &tier->gate_);
  if (o.join) tier->service_->SetJoinHandler(o.join);
  grpc::ResourceQuota quota("sextant-tier");
  quota.SetMaxThreads(std::max(o.max_threads, 2));
  absl::StatusOr<std::unique_ptr<grpc::Server>> server =
      StartFederationServer(o.listen, tier->service_.get(), &tier->port_, o.credentials, &quota);
  if (!server.ok()) return server.status();
  tier->server_ = *std::move(server);
  return tier;
}

absl::Status Tier::AwaitClosable(Close how, const std::function<absl::Status()>& interrupt) {
  while (true) {
    const bool ready =
        how == Close::kSecure ? secagg_->WaitAndAdvance(kPoll) : hub_->WaitReadyToClose(kPoll);
    if (ready) return absl::OkStatus();
    if (absl::Status s = interrupt(); !s.ok()) return s;
  }
}

absl::StatusOr<std::vector<std::string>> Tier::AwaitContact(
    const std::vector<std::string>& ids, absl::Duration wait,
    const std::function<absl::Status()>& interrupt) {
  const absl::Time until = clock_->Now() + wait;
  std::vector<std::string> missing = ids;
  while (!missing.empty() && clock_->Now() < until) {
    missing = hub_->WaitForContact(ids, std::min(kPoll, until - clock_->Now()));
    if (absl::Status s = interrupt(); !s.ok()) return s;
  }
  return missing;
}

void Tier::Shutdown(absl::Duration grace) {
  hub_->SetDone();
  if (secagg_) secagg_->SetDone();
  hub_->WaitUntilAllHeardDone(grace);
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server_.reset();
  }
}

}  // namespace sextant
