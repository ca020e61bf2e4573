#include "orchestrator/federated/run_bill.h"

#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/federated_placement.h"
#include "orchestrator/cost/pool_offer.h"

namespace sextant {

namespace {

int Count(const std::map<std::string, int>& m, const std::string& key) {
  auto it = m.find(key);
  return it == m.end() ? 0 : it->second;
}

}  // namespace

absl::Status RunBill::Start(absl::Time run_start, const Participants* participants) {
  participants_ = participants;
  if (spec_.resources().pools_size() == 0) return absl::OkStatus();
  std::vector<CatalogError> errors;
  SEXTANT_ASSIGN_OR_RETURN(Catalog catalog, LoadCatalog(spec_.resources().catalog(), &errors));
  SEXTANT_ASSIGN_OR_RETURN(FederatedPlacement placement,
                           FederatedPlacement::Create(spec_, catalog));
  SEXTANT_ASSIGN_OR_RETURN(std::vector<CostRow> prior, store_->LoadCosts());
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> fleet, store_->GetMeta("fleet"));
  if (fleet) prior_pools_ = PoolsFromFleetMeta(*fleet);
  billing_.emplace(std::move(placement), clock_, run_start, std::move(prior));
  return absl::OkStatus();
}

absl::Status RunBill::Write() {
  if (!billing_) return absl::OkStatus();
  return WithinTransaction(store_, [&]() -> absl::Status {
    SEXTANT_RETURN_IF_ERROR(store_->PutMeta("fleet", FleetMetaJson()));
    return store_->ReplaceCosts(billing_->Rows());
  });
}

// Each pool's region, market, participants launched and instances the market took back,
// earlier sessions' counts included.
std::string RunBill::FleetMetaJson() const {
  FleetMeta meta{spec_.resources().provider(), billing_->Committed(), 0, {}};
  for (const v1::Pool& p : spec_.resources().pools()) {
    FleetPoolStats& st = meta.pools[p.name()];
    st = {p.name(), p.region(), MarketName(PoolMarket(p.market()))};
    if (auto prior = prior_pools_.find(p.name()); prior != prior_pools_.end()) {
      st.launched = prior->second.launched;
      st.preemptions = prior->second.preemptions;
    }
    st.launched +=
        Count(participants_->launched(), p.name()) + Count(hand_joins_->billed(), p.name());
    st.preemptions += Count(participants_->preemptions(), p.name());
    st.interruptions = st.preemptions;  // each one took a participant with it
  }
  return FleetMetaToJson(meta);
}

absl::Status RunBill::CloseRound(int64_t round, double event_time) {
  if (!billing_) return absl::OkStatus();
  const double cost = billing_->CloseRound();
  // projected: what the budget check expected the round to add ("-" for a session's first).
  SEXTANT_RETURN_IF_ERROR(store_->AddEvent(
      event_time, "round_cost", 0,
      absl::StrFormat("round=%d cost=%.6f projected=%s total=%.6f transfer=%.6f", round, cost,
                      projected_ ? absl::StrFormat("%.6f", *projected_) : "-",
                      billing_->Committed(), billing_->transfer())));
  return Write();
}

absl::Status RunBill::CheckBefore(int64_t round, int64_t last_round, double event_time,
                                  std::ostream& out) {
  if (!billing_) return absl::OkStatus();
  const double projected = billing_->NextRoundProjection();
  projected_.reset();
  if (billing_->projects()) projected_ = projected;
  if (!spec_.budget().has_max_cost()) return absl::OkStatus();
  const double committed = billing_->Committed();
  // The round must fit, and so must stopping after it: its participants are billed until they
  // have exited.
  const double with_wind_down = billing_->NextRoundProjection(kParticipantWindDown);
  if (committed + with_wind_down <= spec_.budget().max_cost()) return absl::OkStatus();
  const std::string why = absl::StrFormat(
      "budget: round %d would pass max_cost %.6g (spent %.6f, a round costs up to %.6f and "
      "stopping after it %.6f more); the model is round %d's",
      round, spec_.budget().max_cost(), committed, projected, with_wind_down - projected,
      last_round);
  out << "sextant: " << why << "\n";
  (void)store_->AddEvent(event_time, "budget_exhausted", 0, why);
  return absl::ResourceExhaustedError(why);
}

bool RunBill::Reached(int64_t running, int64_t last_round, double event_time, std::ostream& out) {
  if (!billing_ || !spec_.budget().has_max_cost()) return false;
  const double owed = billing_->Committed() + billing_->KeepingCost(kParticipantWindDown);
  if (owed < spec_.budget().max_cost()) return false;
  const std::string why = absl::StrFormat(
      "budget: max_cost %.6g reached while round %d ran (spent %.6f, stopping %.6f more); the "
      "model is round %d's",
      spec_.budget().max_cost(), running, billing_->Committed(), owed - billing_->Committed(),
      last_round);
  out << "sextant: " << why << "\n";
  (void)store_->AddEvent(event_time, "budget_exhausted", 0, why);
  return true;
}

int RunBill::Preemptions() const {
  int n = 0;
  if (participants_ != nullptr) {
    for (const auto& [pool, k] : participants_->preemptions()) n += k;
  }
  for (const auto& [pool, st] : prior_pools_) n += st.preemptions;
  return n;
}

}  // namespace sextant
