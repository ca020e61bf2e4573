#include "aggregator/tier.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "aggregator/federation_calls.h"
#include "common/ids.h"
#include "common/retry.h"
#include "common/status_macros.h"

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
  auto hub = std::make_unique<FederationHub>(
      *std::move(coordinator), clock, options.stall_timeout, /*min_floats_per_second=*/1 << 18,
      VersionStarts(options.coordinator.buffer.starts_per_version,
                    HashId(options.coordinator.experiment_id)));
  std::unique_ptr<Tier> tier(new Tier(std::move(options), clock, std::move(hub)));
  TierOptions& o = tier->options_;
  if (o.secure) {
    o.secagg.experiment_id = o.coordinator.experiment_id;
    tier->secagg_ = std::make_unique<SecAggHub>(o.secagg, clock);
  }
  tier->service_ = std::make_unique<FederationServiceImpl>(
      tier->hub_.get(), o.chunk_floats, tier->secagg_.get(), &tier->gate_, o.calls);
  if (o.join) tier->service_->SetJoinHandler(o.join);
  if (o.join_report) tier->service_->SetJoinReportHandler(o.join_report);
  tier->service_->SetTransferMeter(&tier->transfer_);
  grpc::ResourceQuota quota("sextant-tier");
  quota.Resize(static_cast<size_t>(std::max<int64_t>(o.max_memory_bytes, 64 << 20)));
  absl::StatusOr<std::unique_ptr<grpc::Server>> server = StartFederationServer(
      o.listen, tier->service_.get(), &tier->port_, o.credentials, &quota, o.interceptors);
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

absl::Status Tier::OpenRound(RoundPlan plan) {
  open_ = std::move(plan);
  if (open_.open_secure) SEXTANT_RETURN_IF_ERROR(open_.open_secure(*secagg_));
  if (open_.tasks.empty()) return absl::OkStatus();
  std::vector<std::string> participants;
  for (const auto& [id, task] : open_.tasks) participants.push_back(id);
  SEXTANT_RETURN_IF_ERROR(hub_->Publish(open_.round, open_.model_path, std::move(open_.tasks),
                                        open_.deadline_seconds, open_.min_updates));
  open_.tasks.clear();
  for (std::string& id : participants) open_.tasks[std::move(id)];  // who, for the timings
  if (!published_model_.empty() && published_model_ != open_.model_path) {
    std::error_code ec;
    std::filesystem::remove(published_model_, ec);
  }
  published_model_ = open_.model_path;
  return absl::OkStatus();
}

absl::StatusOr<ClosedRound> Tier::TakeRound() {
  ClosedRound closed;
  if (!open_.open_secure) {
    const double length = absl::ToDoubleSeconds(clock_->Now() - hub_->published_at());
    last_rejected_ = 0;  // the hub counts its own, in the outcome
    SEXTANT_ASSIGN_OR_RETURN(closed.outcome, hub_->Close(&closed.senders));
    std::map<std::string, double> seconds;
    for (const auto& [id, task] : open_.tasks) seconds[id] = length;
    for (const SenderReport& s : closed.senders) {
      if (seconds.count(s.client_id)) seconds[s.client_id] = s.seconds;
    }
    closed.client_seconds.assign(seconds.begin(), seconds.end());
    return closed;
  }
  absl::StatusOr<SecAggRoundOutcome> out = secagg_->TakeOutcome();
  // The messages turned away count with the round, whether or not it aborted.
  const int64_t rejections = secagg_->rejections();
  const int64_t rejected = rejections - secure_rejections_;
  secure_rejections_ = rejections;
  last_rejected_ = rejected;
  if (!out.ok()) return out.status();
  closed.client_seconds = std::move(out->client_seconds);
  if (!open_.keep_sum) {
    const int64_t max_clients =
        open_.decode_max_clients > 0 ? open_.decode_max_clients : out->config.num_clients;
    SEXTANT_ASSIGN_OR_RETURN(
        closed.outcome,
        DecodeSecureRound(*out, max_clients, options_.coordinator.model_size, &secure_mean_));
  } else {
    closed.outcome.round = out->round;
    closed.outcome.count = out->count;
    closed.outcome.senders = static_cast<int64_t>(out->contributors.size());
    closed.outcome.metrics = out->metrics;
    closed.sum = std::move(out->sum);
  }
  closed.outcome.round = open_.round;
  // A region says how many clients stand behind its sum and how many updates they rejected;
  // a client stands for itself and rejects nothing, whatever it says.
  if (options_.upstream) closed.outcome.count = closed.outcome.senders;
  closed.outcome.rejected = (options_.upstream ? 0 : out->rejected) + rejected;
  return closed;
}

absl::StatusOr<ClosedRound> Tier::RunRound(RoundPlan plan,
                                           const std::function<absl::Status()>& interrupt) {
  const Close how = plan.open_secure ? Close::kSecure : Close::kPlain;
  SEXTANT_RETURN_IF_ERROR(OpenRound(std::move(plan)));
  SEXTANT_RETURN_IF_ERROR(AwaitClosable(how, [&] {
    RelayFailures();  // the run's console names each failed participant as it goes
    return interrupt();
  }));
  return TakeRound();
}

void Tier::ReleaseOutcome() {
  hub_->ReleaseOutcome();
  secure_mean_.Release();
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

absl::StatusOr<RoundTask> Tier::PullRound(
    int64_t after_round, double wait_seconds,
    const std::function<absl::Status(int64_t, absl::Span<const float>)>& sink,
    const std::function<absl::Status()>& interrupt) {
  if (!options_.upstream) return absl::FailedPreconditionError("the global tier has no upstream");
  const UpstreamOptions& up = *options_.upstream;
  absl::StatusOr<RoundTask> task = RetryWhileUnreachable<RoundTask>(
      clock_, RetryPolicy{up.unreachable_timeout, kPoll},
      [&] {
        return sextant::PullRound(up.stub.get(), options_.coordinator.experiment_id, up.sender_id,
                                  after_round, wait_seconds, sink);
      },
      [&](const absl::Status&) { return interrupt(); });
  if (IsUnreachable(task.status())) {
    return absl::UnavailableError(
        absl::StrCat("upstream ", up.target, " unreachable: ", task.status().message()));
  }
  return task;
}

absl::StatusOr<int64_t> Tier::PushAggregate(PushHeader header, absl::Span<const float> mean) {
  if (!options_.upstream) return absl::FailedPreconditionError("the global tier has no upstream");
  header.experiment_id = options_.coordinator.experiment_id;
  header.client_id = options_.upstream->sender_id;
  return PushUpdate(options_.upstream->stub.get(), header, mean, options_.chunk_floats);
}

void Tier::RelayFailures() {
  if (!options_.upstream) return;
  const UpstreamOptions& up = *options_.upstream;
  for (const FailureReport& f : hub_->TakeFailures()) {
    // Upstream knows a client by its place; the console names it by its own name too.
    const std::string place =
        up.place_of && f.failed != up.sender_id ? up.place_of(f.failed) : f.failed;
    (void)ReportFailure(up.stub.get(), options_.coordinator.experiment_id, f.round, up.sender_id,
                        place,
                        place == f.failed ? f.error : absl::StrCat("(", f.failed, ") ", f.error));
  }
}

absl::Status Tier::ReportRoundFailed(int64_t round, const std::string& why) {
  if (!options_.upstream) return absl::FailedPreconditionError("the global tier has no upstream");
  RelayFailures();  // the causes first
  return ReportFailure(options_.upstream->stub.get(), options_.coordinator.experiment_id, round,
                       options_.upstream->sender_id, options_.upstream->sender_id, why);
}

void Tier::Shutdown(absl::Duration grace) {
  hub_->SetDone();
  if (secagg_) secagg_->SetDone();
  hub_->WaitUntilAllHeardDone(grace);
  StopServer();
}

void Tier::Stop() {
  hub_->SetStopping();
  if (secagg_) secagg_->SetDone();
  StopServer();
}

void Tier::StopServer() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_.reset();
}

}  // namespace sextant
