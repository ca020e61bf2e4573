// sextant-worker: joins a running experiment and runs the trials it leases.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <string>

#include "absl/strings/numbers.h"
#include "common/clock.h"
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

void Usage() {
  std::cerr << "usage: sextant-worker --connect HOST:PORT [--region R] [--pool P]\n"
               "                      [--gpus 0,1] [--preempt-notice SECONDS]\n"
               "                      [--tls-dir DIR [--tls-name worker] | --secret-file FILE]\n"
               "                      [--role client|aggregator] [--exit-with-parent]\n"
               "       sextant-worker train --help\n"
               "       sextant-worker devices\n";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "train") {
    return sextant::train::RunTrainCommand(argc - 1, argv + 1);
  }
  if (sextant::IsFederatedInvocation(argc, argv)) {
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) != "--exit-with-parent") continue;
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      // The parent may have died before the signal was armed (killed while launching us).
      if (getppid() == 1) return 1;
    }
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = OnSignal;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    signal(SIGPIPE, SIG_IGN);
    return sextant::RunFederatedMain(argc, argv, &g_stop);
  }
  sextant::WorkerOptions options;
  bool exit_with_parent = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        std::cerr << "sextant-worker: " << arg << " needs a value\n";
        return false;
      }
      *out = argv[++i];
      return true;
    };
    std::string role, version;
    if (arg == "devices") {
      auto gpus = sextant::QueryGpus();
      std::cout << "cuda_built=" << (sextant::BuiltWithCuda() ? 1 : 0) << " gpus=" << gpus.size()
                << "\n";
      for (const auto& g : gpus) std::cout << g.index << ": " << g.name << "\n";
      return 0;
    } else if (arg == "--connect") {
      if (!value(&options.target)) return 2;
    } else if (arg == "--region") {
      if (!value(&options.region)) return 2;
    } else if (arg == "--pool") {
      if (!value(&options.pool)) return 2;
    } else if (arg == "--gpus") {
      if (!value(&options.gpus)) return 2;
    } else if (arg == "--preempt-notice") {
      std::string s;
      if (!value(&s) || !absl::SimpleAtod(s, &options.preempt_notice_seconds) ||
          options.preempt_notice_seconds < 0) {
        std::cerr << "sextant-worker: --preempt-notice takes seconds >= 0\n";
        return 2;
      }
    } else if (arg == "--tls-dir") {
      if (!value(&options.tls_dir)) return 2;
    } else if (arg == "--tls-name") {
      if (!value(&options.tls_name)) return 2;
    } else if (arg == "--secret-file") {
      if (!value(&options.secret_file)) return 2;
    } else if (arg == "--launch-token") {
      if (!value(&options.launch_token)) return 2;
    } else if (arg == "--role") {
      if (!value(&role)) return 2;
      if (role != "client") {  // aggregators are handled by RunFederatedMain
        std::cerr << "sextant-worker: --role " << role << " is not available in this build\n";
        return 2;
      }
    } else if (arg == "--protocol-version") {
      if (!value(&version) || !absl::SimpleAtoi(version, &options.protocol_version)) return 2;
    } else if (arg == "--exit-with-parent") {
      exit_with_parent = true;
    } else if (arg == "-h" || arg == "--help") {
      Usage();
      return 0;
    } else {
      std::cerr << "sextant-worker: unknown argument " << arg << "\n";
      Usage();
      return 2;
    }
  }
  if (options.target.empty()) {
    Usage();
    return 2;
  }
  if (exit_with_parent) {
    // A local worker must not outlive an orchestrator that was killed outright.
    prctl(PR_SET_PDEATHSIG, SIGINT);
    if (getppid() == 1) return 1;
  }
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sa.sa_handler = OnPreemptSignal;
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return sextant::RunWorker(options, sextant::RealClockInstance(), &g_stop, &g_preempt);
}
