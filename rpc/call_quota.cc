#include "rpc/call_quota.h"

#include "absl/strings/str_cat.h"

namespace sextant {

CallQuota::Ticket& CallQuota::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    quota_ = other.quota_;
    key_ = std::move(other.key_);
    other.quota_ = nullptr;
  }
  return *this;
}

void CallQuota::Ticket::Release() {
  if (quota_ != nullptr) quota_->Release(key_);
  quota_ = nullptr;
}

absl::StatusOr<CallQuota::Ticket> CallQuota::Admit(const std::optional<PeerIdentity>& caller) {
  const std::string key = caller ? IdentityUri(*caller) : std::string();
  absl::MutexLock lock(&mu_);
  if (active_ >= limits_.max_calls) {
    ++refused_;
    return absl::ResourceExhaustedError(
        absl::StrCat("this server runs at most ", limits_.max_calls, " calls at once"));
  }
  if (!key.empty()) {
    int& mine = per_identity_[key];
    if (mine >= limits_.per_identity) {
      ++refused_;
      return absl::ResourceExhaustedError(absl::StrCat(key, " has ", mine,
                                                       " calls running here; at most ",
                                                       limits_.per_identity, " per identity"));
    }
    ++mine;
  }
  ++active_;
  return Ticket(this, key);
}

void CallQuota::Release(const std::string& key) {
  absl::MutexLock lock(&mu_);
  --active_;
  if (key.empty()) return;
  auto it = per_identity_.find(key);
  if (it != per_identity_.end() && --it->second <= 0) per_identity_.erase(it);
}

int CallQuota::active() {
  absl::MutexLock lock(&mu_);
  return active_;
}

int64_t CallQuota::refused() {
  absl::MutexLock lock(&mu_);
  return refused_;
}

}  // namespace sextant
