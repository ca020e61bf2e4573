#ifndef SEXTANT_ORCHESTRATOR_CORE_WORKER_ROSTER_H_
#define SEXTANT_ORCHESTRATOR_CORE_WORKER_ROSTER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "orchestrator/core/store.h"
#include "sextant/v1/experiment.pb.h"
#include "sextant/v1/worker_service.pb.h"

namespace sextant {

// The longest hostname a worker may register with.
inline constexpr size_t kMaxHostnameBytes = 512;

// What a registering worker says about itself, checked before anything is kept: its protocol
// version (FailedPrecondition when it differs from ours), its region, pool and launch token
// (InvalidArgument unless each is empty or a valid id), its hostname (InvalidArgument over
// kMaxHostnameBytes), and a pool of the run only from that pool's region (PermissionDenied:
// the pool is billed at its region's price).
absl::Status CheckRegistration(const v1::ExperimentSpec& spec, const v1::RegisterRequest& request);

// Where a registered worker says it runs, and the token its provider launched it with.
struct WorkerInfo {
  std::string region;
  std::string pool;
  std::string launch_token;  // empty for a worker started by hand
};

// The run's registered workers, by id. Not thread-safe.
class WorkerRoster {
 public:
  // Ids continue after the largest one a resumed run has stored.
  void ContinueAfter(int64_t stored_max) { next_id_ = stored_max + 1; }
  // Keeps a (checked) worker and returns its new id.
  int64_t Add(const v1::RegisterRequest& request);
  const std::map<int64_t, WorkerInfo>& workers() const { return workers_; }
  // The worker's pool; empty for an unknown worker.
  const std::string& pool(int64_t worker) const;
  // The worker's instance is going away (or gone): its next lease answers `done`.
  void Retire(int64_t worker) { retired_.insert(worker); }
  bool retired(int64_t worker) const { return retired_.count(worker) > 0; }

 private:
  int64_t next_id_ = 1;
  std::map<int64_t, WorkerInfo> workers_;
  std::set<int64_t> retired_;
};

// Heartbeat samples not yet written: monitoring data, batched so that heartbeats stay cheap.
class TelemetryBuffer {
 public:
  void Add(const TelemetryRow& row) { rows_.push_back(row); }
  // Writes what is buffered in one transaction when `every` has passed since the last write
  // (always, with every = 0).
  absl::Status Flush(Store* store, absl::Time now, absl::Duration every = absl::ZeroDuration());

 private:
  std::vector<TelemetryRow> rows_;
  absl::Time flushed_ = absl::InfinitePast();
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_WORKER_ROSTER_H_
