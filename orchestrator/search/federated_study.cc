#include "orchestrator/search/federated_study.h"

#include <algorithm>

#include "common/status_macros.h"
#include "orchestrator/core/study_cost.h"
#include "orchestrator/cost/budget_guard.h"
#include "orchestrator/cost/catalog.h"
#include "orchestrator/cost/federated_placement.h"

namespace sextant {

bool FederatedOnPools(const v1::ExperimentSpec& spec) {
  return spec.has_federation() && spec.resources().pools_size() > 0;
}

absl::Status FederatedStudy::Plan(Dispatcher& d) {
  std::vector<CatalogError> errors;
  absl::StatusOr<Catalog> catalog = LoadCatalog(spec_.resources().catalog(), &errors);
  if (!catalog.ok()) return absl::InvalidArgumentError(catalog.status().message());
  SEXTANT_ASSIGN_OR_RETURN(FederatedPlacement placement,
                           FederatedPlacement::Create(spec_, *catalog));
  slots_ = FederatedTrialsAtOnce(spec_, placement);
  first_increments_ = placement.FirstIncrements();
  if (spec_.budget().has_max_cost()) {
    SEXTANT_RETURN_IF_ERROR(Record(d).status());  // a resume's earlier bills
    d.rules().lease_gate = [this](const Dispatcher& d) { return CanStart(d); };
  }
  if (slots_ < 1) {
    return absl::InvalidArgumentError(
        "resources.pools cannot hold one trial's participants (raise max_instances)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CostRow>> FederatedStudy::Bills(const Dispatcher& d) {
  const TrialBook& trials = d.trials();
  std::map<int64_t, double> offsets, rounds;
  auto started = store_->GetTimeMeta("started_at");
  for (int64_t id = 1; id <= trials.size(); ++id) {
    const TrialRow* row = trials.row(id);
    rounds[id] = row->fidelity;
    if (started.ok() && *started) offsets[id] = std::max(0.0, row->created_at - **started);
  }
  SEXTANT_ASSIGN_OR_RETURN(std::vector<CostRow> rows,
                           FederatedTrialCosts(run_dir_, trials.size(), offsets, [&](int64_t id) {
                             return trials.row(id)->state == v1::RUNNING;
                           }));
  spent_ = BilledTotal(rows);
  round_ = CostPerRound(rows, rounds);
  // What the running trials may still add: a round each, and the first billing increments
  // of an attempt's participants that its run has not billed yet (it may not have launched
  // them when the gate lets the next one start).
  std::map<int64_t, double> billed;
  for (const CostRow& r : rows) {
    if (r.kind == "trial") billed[r.ref] = r.cost;
  }
  pending_ = 0;
  for (int64_t id = 1; id <= trials.size(); ++id) {
    if (trials.row(id)->state != v1::RUNNING) {
      attempt_billed_from_.erase(id);
      continue;
    }
    const double now = billed[id];
    const double from = attempt_billed_from_.emplace(id, now).first->second;
    pending_ += std::max(0.0, first_increments_ - (now - from)) + round_;
  }
  return rows;
}

bool FederatedStudy::CanStart(const Dispatcher& d) {
  if (!Bills(d).ok()) return false;  // unreadable bills start nothing
  return BudgetGuard(spec_.budget().max_cost())
      .Allows(spent_, pending_, first_increments_ + round_);
}

absl::StatusOr<bool> FederatedStudy::Record(const Dispatcher& d) {
  SEXTANT_ASSIGN_OR_RETURN(std::vector<CostRow> rows, Bills(d));
  SEXTANT_RETURN_IF_ERROR(store_->ReplaceCosts(rows));
  if (!spec_.budget().has_max_cost()) return false;
  BudgetGuard guard(spec_.budget().max_cost());
  return !guard.Allows(spent_, pending_, 0) || (d.running() == 0 && !d.Finished() && !CanStart(d));
}

}  // namespace sextant
