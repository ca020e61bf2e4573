#ifndef SEXTANT_ORCHESTRATOR_ORCHESTRATOR_H_
#define SEXTANT_ORCHESTRATOR_ORCHESTRATOR_H_

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "common/clock.h"
#include "orchestrator/local_launcher.h"

namespace sextant {

struct RunOptions {
  std::string experiment_file;     // `run`: the YAML file
  std::string run_dir;             // default: runs/<name> for run; required for resume
  bool resume = false;             // continue the run in run_dir
  int workers = 0;                 // local workers; 0 = search.max_concurrent
  std::string listen = "127.0.0.1:0";  // the worker service's address; port 0 picks one
  double lease_seconds = 15;       // default 15
  double heartbeat_seconds = 2;    // default 2
  std::string worker_binary;       // default: sextant-worker beside this binary
  bool tty = false;                // draw the progress line in place
  int metrics_port = -1;           // the live report and /metrics on 127.0.0.1:PORT; -1 = off, 0 = any
  // With resources.pools, instances are launched, billed and scaled by the fleet
  // (orchestrator/fleet.h) through the spec's provider:
  double time_scale = 1;           // multiplies spot interruption times and notices; default 1
  std::string slurm_partition;     // slurm: on-demand and reserved jobs; default: Slurm's default
  std::string slurm_spot_partition;  // slurm: spot jobs (preemptible, requeued); default: as above
  // A directory from `sextant certs init`: serve TLS with mTLS and per-role bearer tokens, and
  // give local workers the worker certificate and token. Default empty: plaintext, loopback.
  std::string tls_dir;
  // Replace the experiment's budget.max_cost and budget.max_wall_time (a resume after
  // BUDGET_EXHAUSTED raises them; the new values are stored with the run). Default: keep.
  std::optional<double> max_cost;
  std::optional<double> max_wall_time_seconds;
};

// The process-wide parts a run uses. All are required.
struct RunEnv {
  Clock* clock;
  ProcessLauncher* launcher;
  std::ostream* out;   // progress and the final table
  std::ostream* err;   // errors
};

// Runs (or resumes) an experiment to its end with local workers. Returns the exit code of the
// contract: 0 when it ends normally, 2 on invalid input, 1 on other failures, 130 when
// interrupted by SIGINT/SIGTERM (then running trials are CANCELLED and it can be resumed).
// When budget.max_cost or budget.max_wall_time is reached, running trials get the
// preemption-style notice (they write their checkpoint and stop; those still running after
// the wind-down are cancelled), the run ends BUDGET_EXHAUSTED with exit 0, and a resume with
// a raised budget continues them from their checkpoints.
int RunExperiment(const RunOptions& options, const RunEnv& env);

// Installs the SIGINT/SIGTERM handlers that make RunExperiment stop cleanly.
void InstallStopHandlers();

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_ORCHESTRATOR_H_
