#include "orchestrator/federated/hand_joins.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "orchestrator/cost/federated_placement.h"
#include "rpc/identity.h"
#include "rpc/key_signer.h"

namespace sextant {

namespace {

// True when every pool of `region` (at least one) is static.
bool StaticRegion(const v1::Resources& res, const std::string& region) {
  bool any = false;
  for (const v1::Pool& p : res.pools()) {
    if (p.region() != region) continue;
    if (PoolProvider(res, p) != "static") return false;
    any = true;
  }
  return any;
}

// The federation's region `name`, or null.
const v1::FederatedRegion* Region(const v1::Federation& f, const std::string& name) {
  for (const v1::FederatedRegion& r : f.regions()) {
    if (r.name() == name) return &r;
  }
  return nullptr;
}

}  // namespace

HandJoins::HandJoins(const v1::ExperimentSpec& spec, bool external) : spec_(spec) {
  for (const v1::FederatedRegion& r : spec.federation().regions()) {
    if (external || StaticRegion(spec.resources(), r.name())) regions_.insert(r.name());
  }
}

absl::Status HandJoins::CheckCredentials(const std::string& tls_dir) const {
  if (regions_.empty() || !tls_dir.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the participants of region ", *regions_.begin(),
      " are started by hand (its pools are static) and join with certificates: run with "
      "--tls-dir DIR (`sextant certs init DIR`)"));
}

absl::Status HandJoins::Serve(
    TierOptions* o, const std::string& tls_dir, const std::string& experiment_id, absl::Time now,
    absl::Duration lifetime,
    const std::function<std::vector<std::string>(const v1::FederatedRegion&)>& flags) {
  if (regions_.empty()) return absl::OkStatus();
  // What participants need of the experiment, signed by this orchestrator: its trial's
  // environment (which may hold secrets), the search, budget and resources stay here, and a
  // client command runs in its host's own folder.
  v1::ExperimentSpec shared = spec_;
  shared.clear_source_path();
  shared.mutable_trial()->mutable_env()->clear();
  shared.clear_search();
  shared.clear_budget();
  shared.clear_resources();
  const std::string bytes = shared.SerializeAsString();
  const int64_t expires_at = absl::ToUnixSeconds(now + lifetime);
  absl::StatusOr<KeyAttestation> signature =
      SignAsOrchestrator(tls_dir, ExperimentBinding(experiment_id, bytes, expires_at));
  if (!signature.ok()) return signature.status();
  std::map<std::string, v1::JoinPlan> plans;
  for (const v1::FederatedRegion& r : spec_.federation().regions()) {
    if (!Of(r.name())) continue;  // the run starts this region's participants
    v1::JoinPlan& plan = plans[r.name()];
    for (const std::string& f : flags(r)) plan.add_flags(f);
    plan.set_spec(bytes);
    plan.set_spec_signature(signature->signature);
    plan.set_spec_certificate(signature->certificate_pem);
    plan.set_expires_at(expires_at);
  }
  // Aggregators started by hand ask for their plans, each by its own region's certificate.
  o->join = [this, plans = std::move(plans)](
                const PeerIdentity& caller,
                const std::string& pool) -> absl::StatusOr<v1::JoinPlan> {
    auto it = plans.find(caller.region);
    if (caller.role != Role::kAggregator || it == plans.end()) {
      return absl::PermissionDeniedError(
          absl::StrCat(IdentityUri(caller),
                       " may not join here: only an aggregator certificate of one of the run's "
                       "regions started by hand"));
    }
    if (!pool.empty()) {
      SEXTANT_RETURN_IF_ERROR(
          Queue(absl::StrCat("aggregator ", caller.region), caller.region, true, pool));
    }
    return it->second;
  };
  // A client started by hand that named its pool, as its region's aggregator reports it.
  o->join_report = [this](const PeerIdentity& caller, const std::string& client_id,
                          const std::string& pool) -> absl::Status {
    const std::string region = client_id.substr(0, client_id.find('/'));
    int index = -1;
    const v1::FederatedRegion* r = Region(spec_.federation(), region);
    if (caller.role != Role::kAggregator || caller.region != region || r == nullptr ||
        !absl::SimpleAtoi(client_id.substr(client_id.find('/') + 1), &index) || index < 0 ||
        index >= r->clients()) {
      return absl::PermissionDeniedError(
          absl::StrCat(IdentityUri(caller), " may not report client ", client_id,
                       ": only the aggregator of its region, for one of its places"));
    }
    return Queue(absl::StrCat("client ", client_id), region, false, pool);
  };
  return absl::OkStatus();
}

absl::Status HandJoins::Queue(std::string who, const std::string& region, bool aggregator,
                              const std::string& pool) {
  std::vector<std::string> names;
  for (const v1::Pool& p : spec_.resources().pools()) {
    names.push_back(p.name());
    if (p.name() != pool) continue;
    if (p.region() != region) {
      return absl::InvalidArgumentError(
          absl::StrCat("pool ", pool, " is in region ", p.region(), ", not ", region,
                       ": a participant is billed on a pool of its own region"));
    }
    if (!PoolHosts(p, aggregator)) {
      return absl::InvalidArgumentError(absl::StrCat("pool ", pool, " hosts ", p.hosts(),
                                                     " only, not ",
                                                     aggregator ? "an aggregator" : "clients"));
    }
    absl::MutexLock lock(&mu_);
    queued_.push_back({std::move(who), pool});
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "no pool ", pool, " in the run's resources.pools (",
      names.empty() ? "it has none: the run bills nothing" : absl::StrJoin(names, ", "), ")"));
}

void HandJoins::Bill(FederatedBilling* billing, Store* store, double event_time) {
  std::vector<std::pair<std::string, std::string>> joins;
  {
    absl::MutexLock lock(&mu_);
    joins.swap(queued_);
  }
  if (billing == nullptr) return;
  for (const auto& [who, pool] : joins) {
    if (!billed_.emplace(who, pool).second) continue;
    const PoolOffer* offer = billing->placement().Pool(pool);
    if (offer == nullptr) continue;  // checked when it joined
    billing->StartOn(*offer);
    ++billed_by_pool_[pool];
    (void)store->AddEvent(
        event_time, "federation_joined", 0,
        absl::StrCat(who, " joined on pool ", pool, ": billed from now to the end of the run"));
  }
}

void HandJoins::Announce(std::ostream& out, int port, const std::string& experiment_id) const {
  out << "sextant: waiting for the regions' aggregators and clients, started by hand with "
         "certificates of this CA (sextant certs issue --role aggregator|client --region R):\n";
  // The pool each participant is billed on, when the region has one for its role.
  auto pool_flag = [&](const std::string& region, bool aggregator) {
    for (const v1::Pool& p : spec_.resources().pools()) {
      if (p.region() == region && PoolHosts(p, aggregator)) return " --pool " + p.name();
    }
    return std::string();
  };
  for (const v1::FederatedRegion& r : spec_.federation().regions()) {
    if (!Of(r.name())) continue;
    out << "  region " << r.name() << ": sextant-worker --role aggregator --join --connect "
        << "THIS_HOST:" << port << " --tls-dir DIR --tls-name NAME" << pool_flag(r.name(), true)
        << " --listen ADDRESS:PORT --work-dir DIR; then " << r.clients()
        << " x sextant-worker --role client --join --connect AGGREGATOR:PORT --tls-dir DIR "
           "--tls-name NAME"
        << pool_flag(r.name(), false) << " --experiment-id " << experiment_id << "\n";
  }
  out << std::flush;
}

}  // namespace sextant
