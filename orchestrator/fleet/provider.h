#ifndef SEXTANT_ORCHESTRATOR_FLEET_PROVIDER_H_
#define SEXTANT_ORCHESTRATOR_FLEET_PROVIDER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "orchestrator/cost/catalog.h"

namespace sextant {

// How a worker dials the orchestrator: TLS from a certificate folder, or, on loopback, with the
// run's worker secret (rpc/run_secret.h).
struct WorkerCredentials {
  // An absolute `sextant certs init` folder reachable where the worker runs. Default empty.
  std::string tls_dir;
  // Without tls_dir: the run's worker secret file (RUN_DIR/secrets/worker.secret). Default empty.
  std::string secret_file;

  // Appends the worker's flags for these (--tls-dir DIR, or --secret-file FILE) to argv.
  void AppendFlags(std::vector<std::string>* argv) const {
    if (!tls_dir.empty()) {
      argv->insert(argv->end(), {"--tls-dir", tls_dir});
    } else if (!secret_file.empty()) {
      argv->insert(argv->end(), {"--secret-file", secret_file});
    }
  }
};

// One instance to start: a worker for a pool, told how to reach the orchestrator, or, with
// `command`, a federated participant (an aggregator or a client) that runs that command.
struct InstanceRequest {
  std::string pool;
  std::string region;
  std::string instance;  // the catalog's instance type, e.g. "gpu.1x"
  Market market = Market::kOnDemand;
  std::string launch_token;           // unique per instance; the worker registers with it
  std::string connect;                // HOST:PORT of the worker service
  std::string log_path;               // where the worker's stdout and stderr go
  double preempt_notice_seconds = 0;  // the worker's --preempt-notice; 0 = the worker's default
  WorkerCredentials credentials;      // how the worker dials; default: plaintext
  // When not empty, the instance runs this argv (argv[0] a path) instead of a worker: connect,
  // preempt_notice_seconds and credentials are then not used, and launch_token only names it
  // (a Slurm job's name).
  std::vector<std::string> command;
};

// What a provider knows of an instance it launched.
struct InstanceStatus {
  enum class State { kPending, kRunning, kGone };
  State state = State::kPending;
  std::string detail;  // why it is gone (exit status, Slurm state), for the event log

  static InstanceStatus Pending() { return {State::kPending, ""}; }
  static InstanceStatus Running() { return {State::kRunning, ""}; }
  static InstanceStatus Gone(std::string why) { return {State::kGone, std::move(why)}; }
  bool gone() const { return state == State::kGone; }
};

// Where workers run: starts and stops instances, each running one `sextant-worker` that
// registers with its request's launch token (or the request's own command). The fleet (orchestrator/fleet/fleet.h) owns billing,
// placement and scaling; a provider only acts. Not thread-safe; runs on the orchestrator loop.
class Provider {
 public:
  virtual ~Provider() = default;

  // "local", "static", "slurm".
  virtual const char* name() const = 0;

  // False when instances cannot be launched at all (workers are started by hand and only
  // accepted). Launch then always fails with FailedPrecondition.
  virtual bool launches() const { return true; }
  // Whether instances of `pool` can be launched (false: its workers are started by hand). A
  // provider that places every pool the same way answers launches().
  virtual bool Launches(const std::string& pool) const {
    (void)pool;
    return launches();
  }

  // Starts an instance. Returns the provider's handle for it (a pid, a Slurm job id).
  // Unavailable when there is no capacity now (retry later or elsewhere), FailedPrecondition
  // when this provider never launches, Internal on other failures (a command that failed).
  virtual absl::StatusOr<std::string> Launch(const InstanceRequest& request) = 0;

  // Asks the instance to stop (its worker finishes and exits). A handle that is already gone
  // is not an error. Internal when the request could not be made.
  virtual absl::Status Terminate(const std::string& handle) = 0;

  // The instance's state now. An unknown handle is Gone.
  virtual InstanceStatus Poll(const std::string& handle) = 0;

  // How events name the instance `handle`: "pid=123", "slurm job=45".
  virtual std::string Label(const std::string& handle) const {
    return absl::StrCat(name(), " ", handle);
  }

  // Takes a spot instance back, as the market would: with notice, the worker is told to
  // checkpoint and go (SIGTERM); without, it is killed at once. Unimplemented when the
  // provider cannot inject interruptions (the default).
  virtual absl::Status Interrupt(const std::string& handle, bool notice) {
    (void)handle;
    (void)notice;
    return absl::UnimplementedError(absl::StrCat(name(), " cannot inject interruptions"));
  }
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FLEET_PROVIDER_H_
