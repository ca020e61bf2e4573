#ifndef SEXTANT_ORCHESTRATOR_SESSION_RUN_SESSION_H_
#define SEXTANT_ORCHESTRATOR_SESSION_RUN_SESSION_H_

#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/monitor/run_monitor.h"
#include "rpc/run_secret.h"
#include "rpc/server_security.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

struct RunOptions {
  std::string experiment_file;         // `run`: the YAML file
  std::string run_dir;                 // default: runs/<name> for run; required for resume
  bool resume = false;                 // continue the run in run_dir
  int workers = 0;                     // local workers; 0 = search.max_concurrent
  std::string listen = "127.0.0.1:0";  // the worker service's address; port 0 picks one
  double lease_seconds = 15;           // default 15
  double heartbeat_seconds = 2;        // default 2
  std::string worker_binary;           // default: sextant-worker beside this binary
  bool tty = false;                    // draw the progress line in place
  int metrics_port = -1;  // the live report and /metrics on 127.0.0.1:PORT; -1 = off, 0 = any
  // With resources.pools, instances are launched, billed and scaled by the fleet
  // (orchestrator/fleet/fleet.h) through the spec's provider:
  double time_scale = 1;             // multiplies spot interruption times and notices; default 1
  std::string slurm_partition;       // slurm: on-demand and reserved jobs; default: Slurm's default
  std::string slurm_spot_partition;  // slurm: spot jobs (preemptible, requeued); default: as above
  // A directory from `sextant certs init`: serve TLS with mTLS and per-role bearer tokens, and
  // give local workers the worker certificate and token. Default empty: plaintext, loopback.
  std::string tls_dir;
  // Federated runs: the regional aggregators and clients are started by hand on their own hosts
  // (`sextant-worker --role aggregator|client --join`, each with a certificate from `sextant
  // certs issue`) instead of by the run; they ask the run what to run with. Needs tls_dir.
  // Default false: the run starts them on this host.
  bool external_participants = false;
  // Replace the experiment's budget.max_cost and budget.max_wall_time (a resume after
  // BUDGET_EXHAUSTED raises them; the new values are stored with the run). Default: keep.
  std::optional<double> max_cost;
  std::optional<double> max_wall_time_seconds;
  // Replace budget.max_epsilon (a federated search with DP; a resume after EPSILON_EXHAUSTED
  // raises it; stored with the run). Default: keep.
  std::optional<double> max_epsilon;
  // One trial of a federated search (SEXTANT_FEDERATED_TRIAL=1): each round's line carries the
  // trial's metrics (rounds=N val_accuracy= val_loss=) for its worker, and under a scheduler
  // over rounds (search.fidelity.name: rounds) the run pauses after round pause_after_round
  // (SEXTANT_FIDELITY, the rung), resumable, to go on when the scheduler promotes the trial.
  // Defaults: false, 0 (no pause).
  bool federated_trial = false;
  int64_t pause_after_round = 0;
  // Replace search.max_trials on resume (a search, ask/tell included, given room for more
  // trials; stored with the run). At least the trials the run already has. Default: keep.
  std::optional<int> max_trials;
};

// The process-wide parts a run uses. All are required and must outlive the run.
struct RunEnv {
  Clock* clock;               // every time read and wait of the run
  ProcessLauncher* launcher;  // workers, participants, the evaluator
  std::ostream* out;          // progress and the final table
  std::ostream* err;          // errors
};

// One run of an experiment, whatever its kind: what the search loop (search/search_run.cc) and the
// federated loop (federated_run.cc) share. Opening it reads the experiment once, takes the run
// directory and its lock, opens the store, loads the server's security and starts the live
// report; destroying it releases them. Not thread-safe; the run's loop owns it.
class RunSession {
 public:
  // Opens options.experiment_file as a new run in options.run_dir (default runs/NAME), or
  // with options.resume the run stored in options.run_dir. A new run's spec (working_dir and
  // source_path made absolute, the budget overrides applied) and started_at are stored; a
  // resume with budget overrides stores the raised spec. The stored spec has no trial env
  // values (orchestrator/core/stored_spec.h): a resume reads them again from the experiment
  // file it names. A process that is one trial of a
  // federated search (SEXTANT_FEDERATED_TRIAL=1) runs the federation with the trial's
  // parameters (SEXTANT_PARAM_*), continuing its own earlier attempt when there is one.
  // Errors, each naming what is wrong:
  //   InvalidArgument: the experiment does not load (the message is the loader's
  //     FILE:LINE:COL lines; see IsLoadError), the directory holds no run to resume or
  //     already holds one, an entry of it is a symbolic link (RunDir), a resume cannot read
  //     the trial env values again, --tls-dir cannot be read, or the listen address needs TLS;
  //   FailedPrecondition: another process holds the directory;
  //   others from the filesystem and the store.
  static absl::StatusOr<std::unique_ptr<RunSession>> Open(const RunOptions& options,
                                                          const RunEnv& env);
  ~RunSession();

  const RunOptions& options() const { return options_; }
  const RunEnv& env() const { return env_; }
  Clock* clock() const { return env_.clock; }
  const v1::ExperimentSpec& spec() const { return spec_; }
  // A plain federated experiment (a federation block and no parameters): the federated loop
  // runs it; otherwise the search loop.
  bool federated() const { return spec_.has_federation() && spec_.parameters_size() == 0; }
  bool resumed() const { return options_.resume; }
  // The run directory as given (relative paths stay relative in messages).
  const std::string& path() const { return path_; }
  RunDir& run_dir() { return *run_dir_; }
  Store& store() { return *store_; }

  // How the run's gRPC server protects itself: TLS and tokens from --tls-dir, else loopback
  // with the run's fresh secrets (secrets() then names their files). A loop may add enrolled
  // certificates before it builds its credentials.
  ServerSecurity& security() { return security_; }
  const RunSecrets& secrets() const { return secrets_; }
  // --tls-dir made absolute; empty without one.
  const std::string& tls_dir() const { return tls_dir_; }
  // The sextant-worker the run starts: --worker-binary, or the one beside this executable.
  std::string worker_binary() const;

  // The live report and /metrics (--metrics-port), started by Open; null without the flag.
  RunMonitor* monitor() { return monitor_.get(); }

  // The signal (SIGINT or SIGTERM) that asked the run to stop, or 0. Handlers installed by
  // InstallStopHandlers record it; RequestStop does the same from code.
  int stop_signal() const;
  static void RequestStop(int sig);

 private:
  RunSession(const RunOptions& options, const RunEnv& env) : options_(options), env_(env) {}
  absl::Status ReadExperiment();
  absl::Status OpenStore();
  // Resume --max-trials: checks it against the stored trials and sets it in spec_, with an
  // event. InvalidArgument below the trials the run has, or for a federated run.
  // --max-epsilon only for a federated search with DP: InvalidArgument otherwise.
  absl::Status CheckMaxEpsilonApplies() const;
  // A new run under random stopping: draws its number of trials (search.max_trials) once, and
  // records the draw (event random_stopping).
  absl::Status DrawStudyTrialsOnce();
  absl::Status RaiseMaxTrials(int max_trials);
  absl::Status LoadSecurity();
  void ApplyBudgetOverrides();

  RunOptions options_;
  RunEnv env_;
  v1::ExperimentSpec spec_;
  std::string path_;
  std::string tls_dir_;
  std::unique_ptr<RunDir> run_dir_;
  std::unique_ptr<Store> store_;
  ServerSecurity security_;
  RunSecrets secrets_;
  std::unique_ptr<RunMonitor> monitor_;
};

// Installs the SIGINT/SIGTERM handlers that ask a run to stop (RunSession::stop_signal), and
// ignores SIGPIPE.
void InstallStopHandlers();

// True for RunSession::Open's error when the experiment file did not load: its message is the
// loader's FILE:LINE:COL lines, to print as they are.
bool IsLoadError(const absl::Status& status);

// The exit code of the contract for how a run ended: 0 for OK (completed, or stopped by its
// budget), 130 for Cancelled (interrupted; it can be resumed), 2 for InvalidArgument, 1 for
// anything else. Prints the error on err: a load error's lines as they are, "sextant: MESSAGE"
// for other errors, nothing for OK and Cancelled (the loop has said how it stopped).
int ExitCode(const absl::Status& status, std::ostream& err);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SESSION_RUN_SESSION_H_
