#ifndef SEXTANT_WORKER_WORKER_CLIENT_H_
#define SEXTANT_WORKER_WORKER_CLIENT_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "sextant/v1/worker_service.grpc.pb.h"

namespace sextant {

struct WorkerOptions {
  std::string target;             // orchestrator HOST:PORT; required
  std::string region = "local";   // default "local"
  std::string pool;               // default empty
  std::string launch_token;       // set by the provider that launched this worker
  int protocol_version = 1;       // default: the current protocol (tests change it)
  double lease_wait_seconds = 5;  // long-poll length for Lease; default 5
  double connect_timeout_seconds =
      30;  // give up when the orchestrator stays unreachable; default 30
  // After a preemption notice, how long the running trial has to checkpoint and exit before it
  // is killed; default 30 s.
  double preempt_notice_seconds = 30;
  // GPUs this worker owns, e.g. "0,1": trials get them as CUDA_VISIBLE_DEVICES and heartbeats
  // report their utilisation. Default empty: no GPU is assigned (telemetry reports all GPUs
  // NVML sees, if any, and the trial's CPU and memory).
  std::string gpus;
  // A directory from `sextant certs init`: connect with TLS, verifying the orchestrator against
  // ca.pem, presenting TLS_NAME.pem/.key as the client certificate and sending TLS_NAME.token
  // (when present) as the bearer token. Default empty: plaintext, on loopback only.
  std::string tls_dir;
  std::string tls_name = "worker";  // default "worker"
  // Without tls_dir: the run's worker secret (RUN_DIR/secrets/worker.secret), sent with every
  // call over local TCP (rpc/run_secret.h). Default empty: plaintext, no secret.
  std::string secret_file;
};

// Registers with the orchestrator and runs leased trials until the orchestrator says the
// experiment is done (exit 0), stop becomes true (exit 0 after stopping the running trial), the
// orchestrator refuses us (exit 2, e.g. a protocol mismatch) or stays unreachable (exit 1).
// A target that is not a loopback address without tls_dir is refused before anything is
// dialled (exit 2, CheckDialAllowed).
// When preempt (may be null) becomes true, a preemption notice arrived: the running trial gets
// SIGTERM and preempt_notice_seconds to checkpoint, its attempt is reported as preempted (not
// failed), and the worker exits 0 without leasing more.
// Prints one-line reasons on stderr.
int RunWorker(const WorkerOptions& options, Clock* clock, const std::atomic<bool>* stop,
              const std::atomic<bool>* preempt = nullptr);

// The orchestrator's WorkerService as options name it (target; tls_dir and tls_name, or
// secret_file): a stub over a channel that takes messages of up to 64 MiB. The dial check's
// error (CheckDialAllowed) for a remote target without TLS, or the credentials' error naming
// --tls-dir or --secret-file.
absl::StatusOr<std::shared_ptr<v1::WorkerService::StubInterface>> DialOrchestrator(
    const WorkerOptions& options);
// RunWorker over `stub` (DialOrchestrator's, or a test's), dialled already.
int RunWorker(const WorkerOptions& options, std::shared_ptr<v1::WorkerService::StubInterface> stub,
              Clock* clock, const std::atomic<bool>* stop,
              const std::atomic<bool>* preempt = nullptr);

}  // namespace sextant

#endif  // SEXTANT_WORKER_WORKER_CLIENT_H_
