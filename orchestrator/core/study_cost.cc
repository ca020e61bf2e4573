#include "orchestrator/core/study_cost.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "orchestrator/core/run_dir.h"

namespace sextant {

absl::StatusOr<std::vector<CostRow>> FederatedTrialCosts(
    const std::string& run_dir, int64_t trials, const std::map<int64_t, double>& offsets,
    const std::function<bool(int64_t)>& running) {
  std::vector<CostRow> out;
  for (int64_t id = 1; id <= trials; ++id) {
    const std::string db = RunDir::DbPath(RunDir::FederatedTrialDir(run_dir, id));
    if (!std::filesystem::exists(db)) continue;
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(db, false, /*read_only=*/true);
    absl::StatusOr<std::vector<CostRow>> rows =
        store.ok() ? (*store)->LoadCosts() : absl::StatusOr<std::vector<CostRow>>(store.status());
    if (!rows.ok()) {
      if (running(id)) continue;  // its run is still creating its store
      return absl::InternalError(
          absl::StrCat("trial ", id, "'s bills (", db, "): ", rows.status().message()));
    }
    auto offset = offsets.find(id);
    const double shift = offset == offsets.end() ? 0 : offset->second;
    CostRow total{"trial", id, "", "", "", 0, 0, 0};
    bool any = false;
    for (CostRow& r : *rows) {
      if (r.kind == "trial") continue;
      r.start += shift;
      r.end += shift;
      total.start = any ? std::min(total.start, r.start) : r.start;
      total.end = std::max(total.end, r.end);
      total.cost += r.cost;
      any = true;
      out.push_back(std::move(r));
    }
    if (any) out.push_back(total);
  }
  return out;
}

double BilledTotal(const std::vector<CostRow>& rows) {
  double total = 0;
  for (const CostRow& r : rows) total += r.kind == "trial" ? 0 : r.cost;
  return total;
}

double CostPerRound(const std::vector<CostRow>& rows, const std::map<int64_t, double>& rounds) {
  double most = 0;
  for (const CostRow& r : rows) {
    if (r.kind != "trial") continue;
    auto n = rounds.find(r.ref);
    if (n != rounds.end() && n->second >= 1) most = std::max(most, r.cost / n->second);
  }
  return most;
}

}  // namespace sextant
