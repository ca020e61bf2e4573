#include "orchestrator/federated/selection_record.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/ids.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace sextant {

absl::Status SelectionRecord::Restore() {
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> speeds, store_->GetMeta("client_speeds"));
  if (speeds) {
    absl::StatusOr<ClientSpeeds> s = ClientSpeeds::FromJson(*speeds);
    if (s.ok()) speeds_ = *std::move(s);
  }
  SEXTANT_ASSIGN_OR_RETURN(std::optional<std::string> sel, store_->GetMeta("client_selection"));
  if (sel) {
    nlohmann::json j = nlohmann::json::parse(*sel, nullptr, false);
    if (j.is_object() && j["selected"].is_object()) {
      for (const auto& [id, n] : j["selected"].items()) {
        if (n.is_number_integer()) selected_[id] = n.get<int64_t>();
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SelectionRecord::Record(const v1::Federation& f, int64_t round,
                                     const std::vector<Participant>& chosen, double event_time) {
  std::vector<std::string> ids;
  for (const Participant& p : chosen) {
    ids.push_back(ClientId(p.region, p.index));
    ++selected_[ids.back()];
  }
  const std::string policy = f.client_selection().empty() ? "random" : f.client_selection();
  nlohmann::json j = {{"policy", policy}, {"selected", selected_}};
  if (!speeds_.estimates().empty()) j["seconds"] = speeds_.estimates();
  SEXTANT_RETURN_IF_ERROR(store_->PutMeta("client_selection", j.dump()));
  return store_->AddEvent(
      event_time, "selection", 0,
      absl::StrCat("round=", round, " policy=", policy, " clients=", absl::StrJoin(ids, ",")));
}

absl::Status SelectionRecord::Observe(const std::vector<SenderReport>& senders) {
  bool any = false;
  for (const SenderReport& s : senders) {
    for (const auto& [id, seconds] : s.client_seconds) {
      speeds_.Observe(id, seconds);
      any = true;
    }
  }
  return any ? store_->PutMeta("client_speeds", speeds_.ToJson()) : absl::OkStatus();
}

}  // namespace sextant
