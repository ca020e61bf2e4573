// sextant-worker: joins a running experiment and runs the trials it leases. `train` runs the
// built-in trainer on its own, `devices` lists the GPUs, and `--role aggregator|evaluator` (or
// `--role client --spec FILE`) takes a federated role (worker/federated/federated_main.h).
// Flags are parsed with CLI11: `sextant-worker --help`, `sextant-worker --role aggregator --help`.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "common/clock.h"
#include "common/process_setup.h"
#include "worker/cuda/device_query.h"
#include "worker/federated/federated_main.h"
#include "worker/train/train_command.h"
#include "worker/worker_client.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_preempt{false};

void OnSignal(int) { g_stop.store(true); }
// SIGTERM is what a cloud's spot notice, Slurm's preemption and `kill` send: checkpoint and go.
void OnPreemptSignal(int) { g_preempt.store(true); }

// A usage error: the message and a pointer to --help on stderr, exit 2 (bad arguments).
int UsageError(const std::string& why) {
  std::cerr << "sextant-worker: " << why << "\nRun 'sextant-worker --help' for usage.\n";
  return 2;
}

int Devices() {
  auto gpus = sextant::QueryGpus();
  std::cout << "cuda_built=" << (sextant::BuiltWithCuda() ? 1 : 0) << " gpus=" << gpus.size()
            << "\n";
  for (const auto& g : gpus) std::cout << g.index << ": " << g.name << "\n";
  return 0;
}

// `sextant-worker train ARGS...`: the trainer parses its own flags (train_command.h).
int Train(const std::vector<std::string>& args) {
  std::vector<std::string> owned = {"train"};
  owned.insert(owned.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : owned) argv.push_back(a.data());
  argv.push_back(nullptr);
  return sextant::train::RunTrainCommand(static_cast<int>(owned.size()), argv.data());
}

// A federated role: the flags are federated_main's. Returns the exit code.
int FederatedRole(int argc, char** argv, sextant::Clock* clock) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--exit-with-parent") continue;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died before the signal was armed (killed while launching us).
    if (getppid() == 1) return 1;
  }
  sextant::InstallSignalHandlers(OnSignal);
  return sextant::RunFederatedMain(argc, argv, clock, &g_stop);
}

// A trial worker until the experiment ends. Returns the exit code.
int TrialWorker(const sextant::WorkerOptions& options, bool exit_with_parent,
                sextant::Clock* clock) {
  if (exit_with_parent) {
    // A local worker must not outlive an orchestrator that was killed outright.
    prctl(PR_SET_PDEATHSIG, SIGINT);
    if (getppid() == 1) return 1;
  }
  sextant::InstallSignalHandlers(OnSignal, OnPreemptSignal);
  return sextant::RunWorker(options, clock, &g_stop, &g_preempt);
}

}  // namespace

int main(int argc, char** argv) {
  sextant::SetUpProcess();
  sextant::Clock* const clock = sextant::RealClockInstance();
  const bool train_first = argc > 1 && std::string(argv[1]) == "train";
  if (!train_first && sextant::IsFederatedInvocation(argc, argv)) {
    return FederatedRole(argc, argv, clock);
  }

  CLI::App app(
      "sextant-worker: joins a running experiment (sextant run) and runs the trials it "
      "leases.",
      "sextant-worker");
  app.failure_message(CLI::FailureMessage::simple);
  app.footer(
      "Federated roles: sextant-worker --role aggregator|evaluator --help, or "
      "--role client --spec FILE --help.");
  sextant::WorkerOptions options;
  std::string preempt_notice, role;
  bool exit_with_parent = false;
  // Each flag keeps the last value given, as a hand-built command line expects.
  auto valued = [&app](const std::string& name, std::string& into, const std::string& help) {
    return app.add_option(name, into, help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  };
  valued("--connect", options.target, "the orchestrator's worker service (required)")
      ->type_name("HOST:PORT");
  valued("--region", options.region, "this worker's region (default local)");
  valued("--pool", options.pool, "the pool it belongs to (default none)");
  valued("--gpus", options.gpus, "the GPUs it owns, e.g. 0,1 (default none)");
  valued("--preempt-notice", preempt_notice,
         "seconds a preempted trial has to checkpoint (default 30)");
  valued("--tls-dir", options.tls_dir, "connect with TLS, certificates from `sextant certs init`")
      ->type_name("DIR");
  valued("--tls-name", options.tls_name, "the certificate and token to present (default worker)");
  valued("--secret-file", options.secret_file,
         "without TLS: the run's worker secret (RUN_DIR/secrets/worker.secret)")
      ->type_name("FILE");
  valued("--launch-token", options.launch_token, "set by the provider that launched this worker");
  app.add_option("--protocol-version", options.protocol_version,
                 "the protocol to speak (default: the current one)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  valued("--role", role, "client (default): run trials");
  app.add_flag("--exit-with-parent", exit_with_parent, "exit when the launching process dies");

  CLI::App* devices = app.add_subcommand("devices", "List the GPUs this worker sees");
  CLI::App* train = app.add_subcommand(
      "train", "Run the built-in trainer on its own (sextant-worker train --help)");
  // Everything after `train` is the trainer's, --help included.
  train->prefix_command();
  train->set_help_flag();
  train->allow_extras();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return UsageError(e.what());
  }
  if (train->parsed()) return Train(train->remaining());
  if (devices->parsed()) return Devices();
  if (!role.empty() && role != "client") {
    return UsageError("--role " + role +
                      ": a trial worker's role is client; aggregator and "
                      "evaluator are federated roles (with their own flags)");
  }
  if (!preempt_notice.empty() &&
      (!absl::SimpleAtod(preempt_notice, &options.preempt_notice_seconds) ||
       !(options.preempt_notice_seconds >= 0))) {
    return UsageError("--preempt-notice takes seconds >= 0");
  }
  if (options.target.empty()) return UsageError("--connect HOST:PORT is required");
  const int rc = TrialWorker(options, exit_with_parent, clock);
  // gRPC's threads may still be building a TLS context for a channel that kept failing its
  // handshake (a server whose certificate does not name the address): OpenSSL's exit handlers
  // would free its locks under them (SIGSEGV). Nothing is left to clean up but the streams.
  std::cout.flush();
  std::cerr.flush();
  _exit(rc);
}
