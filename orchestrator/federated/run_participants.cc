#include "orchestrator/federated/run_participants.h"

#include <filesystem>

#include "aggregator/tier_settings.h"
#include "common/status_macros.h"
#include "rpc/host_address.h"
#include "rpc/server_security.h"

namespace sextant {
namespace {

// How long a signed plan for participants started by hand is valid (JoinPlan.expires_at).
constexpr absl::Duration kPlanLifetime = absl::Hours(24 * 30);

}  // namespace

RunParticipants::RunParticipants(RunSession& session, std::string fed_dir, std::string spec_file)
    : session_(session),
      spec_(session.spec()),
      fed_dir_(std::move(fed_dir)),
      spec_file_(std::move(spec_file)),
      hand_joins_(spec_, session.options().external_participants) {
  // Participants run where their pools' providers say; without pools, where
  // resources.provider says. The loader admits local, slurm and static pools only, which are
  // always made.
  const RunOptions& options = session.options();
  const ProviderOptions where{session.worker_binary(), session.env().launcher,
                              options.slurm_partition, options.slurm_spot_partition};
  absl::StatusOr<std::unique_ptr<Provider>> provider =
      spec_.resources().pools_size() > 0
          ? MakePoolsProvider(spec_.resources(), where)
          : MakeProvider(spec_.resources().provider() == "slurm" ? "slurm" : "local", where);
  provider_ = provider.ok() ? *std::move(provider) : *MakeProvider("local", where);
  participants_.emplace(ParticipantsEnv{provider_.get(), session.env().clock, &session.store(),
                                        session.env().err, session.run_dir().logs_dir(),
                                        options.time_scale});
}

absl::Status RunParticipants::Serve(const std::string& experiment_id, size_t model_size) {
  experiment_id_ = experiment_id;
  model_size_ = model_size;
  SEXTANT_ASSIGN_OR_RETURN(
      TierOptions o, GlobalTierOptions(spec_.federation(), experiment_id_, model_size_, fed_dir_));
  o.listen = session_.options().listen;
  // The session's TLS/mTLS and token rules, as for the worker service (search/search_run.cc).
  ServerSecurity& security = session_.security();
  // Signed anew by every session of the run, each plan valid for kPlanLifetime.
  SEXTANT_RETURN_IF_ERROR(
      hand_joins_.Serve(&o, session_.tls_dir(), experiment_id_, session_.env().clock->Now(),
                        kPlanLifetime, [&](const v1::FederatedRegion& r) {
                          return AggregatorRunFlags(r.name(), experiment_id_, model_size_);
                        }));
  if (!hand_joins_.all() && !session_.tls_dir().empty()) {
    if (absl::Status s = IssueParticipantCertificates(LaunchPlan(), &security); !s.ok()) {
      return absl::InvalidArgumentError(s.message());
    }
  }
  o.credentials = MakeServerCredentials(security);
  SEXTANT_ASSIGN_OR_RETURN(tier_, Tier::Start(std::move(o), session_.env().clock));
  return absl::OkStatus();
}

RegionLaunch RunParticipants::LaunchPlan() const {
  RegionLaunch l;
  l.spec = &spec_;
  l.hand_joins = &hand_joins_;
  l.worker_binary = session_.worker_binary();
  l.tls_dir = session_.tls_dir();
  l.secret_file = session_.secrets().worker_file;
  l.fed_dir = fed_dir_;
  l.logs_dir = session_.run_dir().logs_dir();
  l.experiment_id = experiment_id_;
  l.spec_file = spec_file_;
  l.model_size = model_size_;
  l.startup_wait_seconds = kStartupWaitSeconds;
  l.clock = session_.env().clock;
  return l;
}

absl::Status RunParticipants::Launch() {
  std::filesystem::create_directories(session_.run_dir().logs_dir());
  return LaunchRegions(LaunchPlan(), DialTarget(session_.options().listen, tier_->port()),
                       *participants_);
}

absl::StatusOr<std::vector<std::string>> RunParticipants::AwaitRegions(
    const std::function<absl::Status()>& interrupt) {
  std::vector<std::string> regions;
  for (const auto& r : spec_.federation().regions()) regions.push_back(r.name());
  // Participants started by hand come when their hosts' people start them: no time limit.
  const absl::Duration wait =
      hand_joins_.any() ? absl::InfiniteDuration() : absl::Seconds(kStartupWaitSeconds + 60);
  SEXTANT_ASSIGN_OR_RETURN(std::vector<std::string> missing,
                           tier_->AwaitContact(regions, wait, interrupt));
  // A deadline that ran while the participants were starting would close the first round
  // without the slow starters, as if they were dead.
  tier_->hub().RestartDeadline();
  return missing;
}

// The grace covers a loaded machine: DONE reaches a client through its aggregator's next poll,
// and a client still in a secure-aggregation stage learns it only when that stage's poll
// returns.
void RunParticipants::Teardown() {
  if (tier_) {
    tier_->hub().SetDone();
    if (spec_.federation().hide_region_sums()) tier_->secagg().SetDone();
  }
  participants_->StopAll(absl::Seconds(15));
  // Aggregators started by hand are no children of this run: the server stays up until each
  // has been told the run ended, so that none finds it gone mid-call.
  if (tier_) tier_->Shutdown(hand_joins_.any() ? absl::Seconds(15) : absl::ZeroDuration());
}

}  // namespace sextant
