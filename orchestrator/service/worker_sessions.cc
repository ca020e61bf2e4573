#include "orchestrator/service/worker_sessions.h"

#include <sodium.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sextant {

WorkerSessions::WorkerSessions(Random random, Clock* clock, absl::Duration forget_after)
    : random_(std::move(random)), clock_(clock), forget_after_(forget_after) {
  if (!random_) {
    random_ = [](uint8_t* out, size_t n) {
      if (sodium_init() < 0) std::abort();  // no usable randomness: never hand out weak secrets
      randombytes_buf(out, n);
    };
  }
}

absl::Status WorkerSessions::CanOpen(const std::string& identity) {
  const absl::Time now = clock_->Now();
  for (auto s = sessions_.begin(); s != sessions_.end();) {
    if (now - s->second.used <= forget_after_) {
      ++s;
      continue;
    }
    --per_identity_[s->second.identity];
    s = sessions_.erase(s);
  }
  auto it = per_identity_.find(identity);
  if (it != per_identity_.end() && it->second >= kMaxRegistrationsPerIdentity) {
    return absl::ResourceExhaustedError(absl::StrCat(
        identity.empty() ? "callers without a certificate identity have" : identity + " has",
        " registered ", it->second, " workers, the most one identity may"));
  }
  return absl::OkStatus();
}

std::string WorkerSessions::Open(int64_t worker_id, const std::string& identity) {
  uint8_t bytes[32];
  random_(bytes, sizeof(bytes));
  std::string secret;
  for (uint8_t b : bytes) absl::StrAppendFormat(&secret, "%02x", b);
  sessions_[worker_id] = Session{secret, identity, clock_->Now()};
  ++per_identity_[identity];
  return secret;
}

absl::Status WorkerSessions::Check(int64_t worker_id, absl::string_view session,
                                   const std::string& identity) {
  auto it = sessions_.find(worker_id);
  if (it == sessions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("worker ", worker_id, " is not registered with this orchestrator"));
  }
  const std::string& secret = it->second.secret;
  const bool same = session.size() == secret.size() &&
                    sodium_memcmp(session.data(), secret.data(), secret.size()) == 0;
  if (!same || it->second.identity != identity) {
    return absl::PermissionDeniedError(
        absl::StrCat("this caller is not worker ", worker_id, " (it did not register it)"));
  }
  it->second.used = clock_->Now();
  return absl::OkStatus();
}

}  // namespace sextant
