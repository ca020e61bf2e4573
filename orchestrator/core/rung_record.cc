#include "orchestrator/core/rung_record.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "strategies/search_space.h"

namespace sextant {

void AppendRung(TrialRow& row, std::optional<double> value, std::string_view decision) {
  nlohmann::json rungs = nlohmann::json::parse(row.rungs_json, nullptr, false);
  if (!rungs.is_array()) rungs = nlohmann::json::array();
  nlohmann::json r = {{"fidelity", row.fidelity}, {"decision", decision}};
  r["value"] = value && std::isfinite(*value) ? nlohmann::json(*value) : nlohmann::json(nullptr);
  if (decision == "promoted") r["target"] = row.target;
  rungs.push_back(std::move(r));
  row.rungs_json = rungs.dump();
}

bool PrunePausedAtScheduleEnd(TrialRow& row, std::optional<double> value, double now) {
  if (!row.paused) return false;
  row.paused = false;
  row.state = v1::PRUNED;
  row.finished_at = now;
  if (value && std::isfinite(*value)) row.value = *value;
  AppendRung(row, value, "pruned");  // where it stopped, for the learning-curve plots
  return true;
}

std::string PromotionMessage(const v1::ExperimentSpec& spec, double target) {
  return absl::StrCat("to ", spec.search().fidelity().name(), "=", FormatParamValue(target));
}

std::vector<Observation> BestFidelityHistory(
    const Scheduler& scheduler, int parameters, bool several_objectives, int64_t count,
    absl::FunctionRef<const Params&(int64_t)> params, absl::FunctionRef<bool(int64_t)> running,
    absl::FunctionRef<std::vector<double>(int64_t)> violations) {
  const std::map<int64_t, std::vector<double>> at_best =
      scheduler.ValuesAtBestFidelity(parameters + 2);
  std::vector<Observation> out;
  for (int64_t id = 1; id <= count; ++id) {
    Observation o;
    o.params = params(id);
    auto it = at_best.find(id);
    if (it != at_best.end() && !it->second.empty()) {
      o.outcome = Observation::Outcome::kCompleted;
      if (several_objectives) {
        o.values = it->second;
      } else {
        o.value = it->second[0];
      }
      o.violations = violations(id);
    } else if (!running(id)) {
      continue;
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace sextant
