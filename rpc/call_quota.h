// How many calls a server runs at once: a bound in all and one per certificate identity, so
// that one peer (or a flood of them) cannot take what the others need.
#ifndef SEXTANT_RPC_CALL_QUOTA_H_
#define SEXTANT_RPC_CALL_QUOTA_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rpc/identity.h"

namespace sextant {

struct CallLimits {
  int max_calls = 4096;   // calls running at once, in all
  int per_identity = 16;  // of one certificate identity (the transport's own streams aside)
  // Message bytes that calls may keep while they wait (a sender's first chunk while another
  // sender holds the staging buffer), in all: what the calls' own threads held in a server
  // with one thread per call and 256 threads.
  int64_t max_held_bytes = int64_t{2} << 30;
};

// Thread-safe. Outlives its tickets.
class CallQuota {
 public:
  explicit CallQuota(CallLimits limits = {}) : limits_(limits) {}

  // One admitted call; its place is given back when the ticket is destroyed.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&& other) noexcept { *this = std::move(other); }
    Ticket& operator=(Ticket&& other) noexcept;
    ~Ticket() { Release(); }

    // Keeps `bytes` more while the call waits, until the ticket goes. ResourceExhausted naming
    // the bound when the calls would keep more than max_held_bytes in all.
    absl::Status Hold(int64_t bytes);

   private:
    friend class CallQuota;
    Ticket(CallQuota* quota, std::string key) : quota_(quota), key_(std::move(key)) {}
    void Release();
    CallQuota* quota_ = nullptr;
    std::string key_;  // empty: a caller without a certificate identity
    int64_t held_ = 0;
  };

  // A place for one more call of `caller` (nullopt: no certificate identity, bounded by
  // max_calls alone). ResourceExhausted naming the bound that is reached.
  absl::StatusOr<Ticket> Admit(const std::optional<PeerIdentity>& caller) ABSL_LOCKS_EXCLUDED(mu_);

  int active() ABSL_LOCKS_EXCLUDED(mu_);
  // Bytes kept by waiting calls now (Ticket::Hold).
  int64_t held() ABSL_LOCKS_EXCLUDED(mu_);
  // Calls refused so far.
  int64_t refused() ABSL_LOCKS_EXCLUDED(mu_);
  const CallLimits& limits() const { return limits_; }

 private:
  void Release(const std::string& key, int64_t held) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Hold(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  const CallLimits limits_;
  absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t refused_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> per_identity_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sextant

#endif  // SEXTANT_RPC_CALL_QUOTA_H_
