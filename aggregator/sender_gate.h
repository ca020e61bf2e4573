// Who may speak for which sender at one tier of the rounds, and what a sender may claim.
#ifndef SEXTANT_AGGREGATOR_SENDER_GATE_H_
#define SEXTANT_AGGREGATOR_SENDER_GATE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "rpc/identity.h"

namespace sextant {

// What one tier serves.
struct TierPolicy {
  // The region a regional tier serves; its senders are that region's clients (REGION/NAME).
  // Empty: the global tier, whose senders are regions (their aggregators).
  std::string region;
  // Global tier: each region's enrolled client count, the most one regional update may stand
  // for. A region missing here may not send. Default: empty (any region, any count: no
  // certificate identities in use).
  std::map<std::string, int64_t> region_clients;
  // The largest weight (example count) one client may declare; a region may declare at most
  // its count times this. Default 0: unbounded.
  double max_client_weight = 0;
  // The most distinct senders whose declared weight is kept. Default 100000.
  size_t max_senders = 100000;
};

// Checks every federated call's sender before the hubs see it. Ids are always bounded
// (IsValidId for a region, CheckClientId for a client). With a certificate identity the caller
// may only act as itself: a client as REGION/NAME of its certificate, at its own region's tier;
// an aggregator as its certificate's region, at the global tier. Without one (loopback, or a
// token-only deployment) the id is taken as sent. Thread-safe.
class SenderGate {
 public:
  explicit SenderGate(TierPolicy policy = {}) : policy_(std::move(policy)) {}

  // OK, InvalidArgument for an id out of bounds (naming the field), or PermissionDenied when
  // caller may not act as sender_id here.
  absl::Status CheckCaller(const std::optional<PeerIdentity>& caller,
                           absl::string_view sender_id) const;

  // An update's claim: a client stands for itself (count 1) and its weight is the one its first
  // accepted update declared (RecordClaim); a region stands for at most its enrolled clients.
  // PermissionDenied naming the bound otherwise; ResourceExhausted once max_senders distinct
  // senders are recorded. Records nothing.
  absl::Status CheckClaim(absl::string_view sender_id, double weight, int64_t count)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Fixes a client's weight once its update was accepted whole (a regional tier; no effect at
  // the global tier or for a weight already recorded).
  void RecordClaim(absl::string_view sender_id, double weight) ABSL_LOCKS_EXCLUDED(mu_);

  const TierPolicy& policy() const { return policy_; }

 private:
  const TierPolicy policy_;
  absl::Mutex mu_;
  // Per client (regional tier).
  std::map<std::string, double> declared_weight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_SENDER_GATE_H_
