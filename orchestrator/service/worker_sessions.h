// Binds each registered worker id to the caller that registered it, so that no other caller
// can lease, heartbeat, report or complete as that worker.
#ifndef SEXTANT_ORCHESTRATOR_SERVICE_WORKER_SESSIONS_H_
#define SEXTANT_ORCHESTRATOR_SERVICE_WORKER_SESSIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace sextant {

// The gRPC metadata key that carries a worker's session secret: the orchestrator sends it with
// Register's answer (initial metadata), and the worker sends it with every later call.
inline constexpr char kSessionMetadataKey[] = "sextant-session";

// The most live workers one identity (one certificate, or all identity-less callers together)
// may have registered with one orchestrator at once.
inline constexpr size_t kMaxRegistrationsPerIdentity = 4096;

// Each registration gets a random session secret; later calls for that worker id must carry it
// and come from the same identity (the certificate's sextant:// URI, or "" without one). A worker
// id this orchestrator never registered is unknown. A session unused for forget_after (a live
// worker calls at least every lease wait, 30 s at most) is forgotten, so the cap counts live
// workers. Not thread-safe: WorkerServiceImpl calls it under its lock.
class WorkerSessions {
 public:
  // random fills n bytes; default: the OS's CSPRNG (libsodium). Tests pass their own.
  using Random = std::function<void(uint8_t* out, size_t n)>;
  // clock (default the real one) measures idleness; forget_after defaults to 10 minutes.
  explicit WorkerSessions(Random random = nullptr, Clock* clock = RealClockInstance(),
                          absl::Duration forget_after = absl::Minutes(10));

  // Whether identity may register one more worker (forgetting idle sessions first):
  // ResourceExhausted while it has kMaxRegistrationsPerIdentity live ones.
  absl::Status CanOpen(const std::string& identity);
  // A new session (64 hex characters) for worker_id, registered by identity.
  std::string Open(int64_t worker_id, const std::string& identity);
  // OK when worker_id was opened here with this session (compared in constant time) by this
  // identity, and marks it used. NotFound when worker_id was never registered here (or was
  // forgotten); PermissionDenied otherwise.
  absl::Status Check(int64_t worker_id, absl::string_view session, const std::string& identity);

 private:
  struct Session {
    std::string secret;
    std::string identity;
    absl::Time used;
  };
  Random random_;
  Clock* clock_;
  absl::Duration forget_after_;
  std::map<int64_t, Session> sessions_;
  std::map<std::string, size_t> per_identity_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SERVICE_WORKER_SESSIONS_H_
