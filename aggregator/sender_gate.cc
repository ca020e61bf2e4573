#include "aggregator/sender_gate.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

absl::Status Denied(const PeerIdentity& caller, absl::string_view sender_id,
                    absl::string_view why) {
  return absl::PermissionDeniedError(
      absl::StrCat(IdentityUri(caller), " may not send as '", sender_id, "': ", why));
}

}  // namespace

absl::Status SenderGate::CheckCaller(const std::optional<PeerIdentity>& caller,
                                     absl::string_view sender_id) const {
  const bool global = policy_.region.empty();
  // Ids are bounded whoever calls: a global tier's senders are regions, a regional tier's
  // clients. A tier without a policy region accepts either form (a test hub, a tool).
  absl::Status id = global && policy_.region_clients.empty() && !IsValidId(sender_id)
                        ? CheckClientId("client_id", sender_id)
                    : global ? CheckId("client_id", sender_id)
                             : CheckClientId("client_id", sender_id);
  if (!id.ok()) return id;
  if (!caller) return absl::OkStatus();
  if (global) {
    if (caller->role != Role::kAggregator) {
      return Denied(*caller, sender_id, "only a region's aggregator sends to the global tier");
    }
    if (caller->region != sender_id) {
      return Denied(*caller, sender_id,
                    caller->region.empty() ? "its certificate names no region"
                                           : "its certificate is for another region");
    }
    return absl::OkStatus();
  }
  if (caller->role != Role::kClient) {
    return Denied(*caller, sender_id, "only clients send to a regional aggregator");
  }
  if (caller->region != policy_.region) {
    return Denied(*caller, sender_id,
                  absl::StrCat("its certificate is for region '", caller->region,
                               "', this aggregator serves '", policy_.region, "'"));
  }
  if (caller->ClientId() != sender_id) {
    return Denied(*caller, sender_id, "a client sends only as itself");
  }
  return absl::OkStatus();
}

absl::Status SenderGate::CheckClaim(absl::string_view sender_id, double weight, int64_t count) {
  if (!std::isfinite(weight) || weight < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight ", weight, " of '", sender_id, "' is not a finite count of examples"));
  }
  const double max_weight = policy_.max_client_weight;
  if (policy_.region.empty()) {
    if (policy_.region_clients.empty()) return absl::OkStatus();
    auto it = policy_.region_clients.find(std::string(sender_id));
    if (it == policy_.region_clients.end()) {
      return absl::PermissionDeniedError(
          absl::StrCat("'", sender_id, "' is not a region of this run"));
    }
    if (count < 1 || count > it->second) {
      return absl::PermissionDeniedError(
          absl::StrCat("region '", sender_id, "' claims ", count, " clients; it has ", it->second));
    }
    if (max_weight > 0 && weight > max_weight * static_cast<double>(count)) {
      return absl::PermissionDeniedError(absl::StrCat("region '", sender_id, "' claims weight ",
                                                      weight, " for ", count, " clients; at most ",
                                                      max_weight * static_cast<double>(count)));
    }
    return absl::OkStatus();
  }
  if (count != 1) {
    return absl::PermissionDeniedError(
        absl::StrCat("client '", sender_id, "' claims to stand for ", count, " updates"));
  }
  if (max_weight > 0 && weight > max_weight) {
    return absl::PermissionDeniedError(
        absl::StrCat("client '", sender_id, "' claims weight ", weight, "; at most ", max_weight));
  }
  absl::MutexLock lock(&mu_);
  auto it = declared_weight_.find(std::string(sender_id));
  if (it == declared_weight_.end()) {
    if (declared_weight_.size() >= policy_.max_senders) {
      return absl::ResourceExhaustedError(
          absl::StrCat("this aggregator already knows ", declared_weight_.size(), " clients"));
    }
    return absl::OkStatus();
  }
  if (it->second != weight) {
    return absl::PermissionDeniedError(
        absl::StrCat("client '", sender_id, "' claims weight ", weight, "; it declared ",
                     it->second, " first, and a client's example count does not change"));
  }
  return absl::OkStatus();
}

void SenderGate::RecordClaim(absl::string_view sender_id, double weight) {
  if (policy_.region.empty()) return;
  absl::MutexLock lock(&mu_);
  if (declared_weight_.size() < policy_.max_senders) {
    declared_weight_.emplace(std::string(sender_id), weight);
  }
}

}  // namespace sextant
