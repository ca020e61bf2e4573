#include "rpc/call_quota.h"

#include "absl/strings/str_cat.h"

namespace sextant {

CallQuota::Ticket& CallQuota::Ticket::operator=(Ticket&& other) noexcept {
  if (this != &other) {
    Release();
    quota_ = other.quota_;
    key_ = std::move(other.key_);
    held_ = other.held_;
    other.quota_ = nullptr;
    other.held_ = 0;
  }
  return *this;
}

void CallQuota::Ticket::Release() {
  if (quota_ != nullptr) quota_->Release(key_, held_);
  quota_ = nullptr;
  held_ = 0;
}

absl::Status CallQuota::Ticket::Hold(int64_t bytes) {
  if (quota_ == nullptr) return absl::FailedPreconditionError("no call holds this ticket");
  if (absl::Status s = quota_->Hold(bytes); !s.ok()) return s;
  held_ += bytes;
  return absl::OkStatus();
}

absl::Status CallQuota::Hold(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  if (bytes > limits_.max_held_bytes - held_) {
    ++refused_;
    return absl::ResourceExhaustedError(absl::StrCat(
        "calls waiting here keep ", held_, " bytes; at most ", limits_.max_held_bytes, " in all"));
  }
  held_ += bytes;
  return absl::OkStatus();
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

void CallQuota::Release(const std::string& key, int64_t held) {
  absl::MutexLock lock(&mu_);
  --active_;
  held_ -= held;
  if (key.empty()) return;
  auto it = per_identity_.find(key);
  if (it != per_identity_.end() && --it->second <= 0) per_identity_.erase(it);
}

int64_t CallQuota::held() {
  absl::MutexLock lock(&mu_);
  return held_;
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
