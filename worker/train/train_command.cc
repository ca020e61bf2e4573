#include "worker/train/train_command.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/device_query.h"
#include "worker/train/cpu_backend.h"
#include "worker/train/dataset.h"
#include "worker/train/synthetic_data.h"
#include "worker/train/trainer.h"

namespace sextant::train {
namespace {

// Set by the SIGTERM handler; a signal handler can reach nothing else.
std::atomic<bool> g_stop_requested{false};

void OnTerm(int) { g_stop_requested.store(true); }

struct CommandLine {
  TrainerOptions trainer;
  std::string dataset = "fashion-mnist";
  std::string data_dir = kFashionMnistDir;
  int threads = 2;
  int gpus = 0;
  int64_t train_subset = 0, val_subset = 0;
  int depth = 0;  // --depth: that many hidden layers of --hidden's first width; 0 = as given
};

absl::Status Bad(absl::string_view flag, absl::string_view value, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": '", value, "' is not ", want));
}

template <typename T>
absl::Status ParseInt(absl::string_view flag, absl::string_view v, T* out) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(v, &x)) return Bad(flag, v, "an integer");
  *out = static_cast<T>(x);
  return absl::OkStatus();
}

absl::Status ParseFloat(absl::string_view flag, absl::string_view v, float* out) {
  if (!absl::SimpleAtof(v, out)) return Bad(flag, v, "a number");
  return absl::OkStatus();
}

absl::Status Apply(CommandLine& c, const std::string& flag, const std::string& v) {
  TrainerOptions& t = c.trainer;
  if (flag == "--model")
    t.model.kind = v;
  else if (flag == "--dataset")
    c.dataset = v;
  else if (flag == "--epochs")
    return ParseInt(flag, v, &t.epochs);
  else if (flag == "--batch-size")
    return ParseInt(flag, v, &t.batch_size);
  else if (flag == "--hidden") {
    t.model.hidden.clear();
    for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
      int h = 0;
      if (!absl::SimpleAtoi(part, &h)) return Bad(flag, v, "a comma-separated list of widths");
      t.model.hidden.push_back(h);
    }
  } else if (flag == "--optimizer")
    t.optimizer.kind = v;
  else if (flag == "--lr")
    return ParseFloat(flag, v, &t.optimizer.lr);
  else if (flag == "--dropout")
    return ParseFloat(flag, v, &t.model.dropout);
  else if (flag == "--weight-decay")
    return ParseFloat(flag, v, &t.optimizer.weight_decay);
  else if (flag == "--momentum")
    return ParseFloat(flag, v, &t.optimizer.momentum);
  else if (flag == "--seed")
    return ParseInt(flag, v, &t.seed);
  else if (flag == "--threads")
    return ParseInt(flag, v, &c.threads);
  else if (flag == "--gpus")
    return ParseInt(flag, v, &c.gpus);
  else if (flag == "--checkpoint-dir")
    t.checkpoint_dir = v;
  else if (flag == "--checkpoint-every")
    return ParseInt(flag, v, &t.checkpoint_every_steps);
  else if (flag == "--memory-cap-mb") {
    int64_t mb = 0;
    if (auto s = ParseInt(flag, v, &mb); !s.ok()) return s;
    if (mb < 0) return Bad(flag, v, "a size >= 0");
    t.memory_cap_bytes = mb * 1024 * 1024;
  } else if (flag == "--fidelity-name")
    t.fidelity_name = v;
  else if (flag == "--nan-patience")
    return ParseInt(flag, v, &t.nan_patience);
  else if (flag == "--max-steps")
    return ParseInt(flag, v, &t.max_steps);
  else if (flag == "--train-subset")
    return ParseInt(flag, v, &c.train_subset);
  else if (flag == "--val-subset")
    return ParseInt(flag, v, &c.val_subset);
  else if (flag == "--data-dir")
    c.data_dir = v;
  else if (flag == "--depth") {
    if (auto s = ParseInt(flag, v, &c.depth); !s.ok()) return s;
    if (c.depth < 1 || c.depth > 64) return Bad(flag, v, "a number of layers in 1..64");
  }
  return absl::OkStatus();
}

// The trainer's flags, each taking one value (also as --name=value), with their --help lines.
// The values stay strings for CLI11: Apply converts them with absl, as before (CLI11 would read
// "010" as octal) and with the same messages.
void AddFlags(CLI::App& app) {
  auto flag = [&app](const std::string& name, const std::string& value, const std::string& help) {
    app.add_option(name, help)
        ->type_name(value)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  };
  flag("--model", "mlp|cnn", "the model (default mlp)");
  flag("--dataset", "NAME", "fashion-mnist (default) or synthetic");
  flag("--epochs", "N", "epochs to train (default 10; $SEXTANT_FIDELITY overrides it)");
  flag("--batch-size", "N", "examples per optimiser step (default 128)");
  flag("--hidden", "W,W,...", "hidden layer widths (default 512,256)");
  flag("--optimizer", "adam|sgd", "the optimiser (default adam)");
  flag("--lr", "X", "learning rate (default 0.001)");
  flag("--dropout", "P", "drop probability after each hidden layer, in [0, 1) (default 0)");
  flag("--weight-decay", "X", "L2 coefficient (default 0)");
  flag("--momentum", "X", "sgd's momentum (default 0.9)");
  flag("--seed", "N", "initial weights, shuffling and dropout (default 0)");
  flag("--threads", "N", "CPU backend threads (default 2)");
  flag("--gpus", "N", "train on N CUDA devices, one replica each (default 0: the CPU backend)");
  flag("--checkpoint-dir", "DIR",
       "checkpoint to and resume from DIR (default $SEXTANT_CHECKPOINT_DIR, else none)");
  flag("--checkpoint-every", "STEPS",
       "also checkpoint every STEPS optimiser steps (default 0: at epoch ends only)");
  flag("--memory-cap-mb", "N",
       "working-memory cap; the micro-batch halves until it fits (default 0: none)");
  flag("--fidelity-name", "NAME", "the epoch counter's key in the metrics lines (default epoch)");
  flag("--nan-patience", "N", "non-finite losses in a row before failing as diverged (default 3)");
  flag("--max-steps", "N",
       "stop after N optimiser steps in all, with a checkpoint (default 0: no limit)");
  flag("--train-subset", "N",
       "train on the first N examples (default 0: all; synthetic data: 6000)");
  flag("--val-subset", "N",
       "validate on the first N examples (default 0: all; synthetic data: 1000)");
  flag("--data-dir", "DIR",
       absl::StrCat("the Fashion-MNIST files (default ", kFashionMnistDir, ")"));
  flag("--depth", "N",
       "N hidden layers (1..64), all of --hidden's first width (default: as --hidden)");
}

// The command line from the flags `app` parsed. InvalidArgument naming the flag when one is
// unknown, or a value is not what the flag takes.
absl::StatusOr<CommandLine> ToCommandLine(const CLI::App& app) {
  CommandLine c;
  if (const char* dir = std::getenv("SEXTANT_CHECKPOINT_DIR"); dir != nullptr) {
    c.trainer.checkpoint_dir = dir;
  }
  if (std::vector<std::string> extra = app.remaining(); !extra.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown option '", extra.front().substr(0, extra.front().find('=')), "'"));
  }
  // In the order given, as the hand-written parser did: a repeated flag's last value wins, and
  // the first bad value is the one reported.
  std::map<const CLI::Option*, size_t> taken;
  for (const CLI::Option* option : app.parse_order()) {
    const std::string& value = option->results()[taken[option]++];
    if (auto s = Apply(c, option->get_name(), value); !s.ok()) return s;
  }
  if (c.depth > 0) {
    const int width = c.trainer.model.hidden.empty() ? 128 : c.trainer.model.hidden.front();
    c.trainer.model.hidden.assign(static_cast<size_t>(c.depth), width);
  }
  if (c.threads < 1) return Bad("--threads", std::to_string(c.threads), "a count >= 1");
  if (c.gpus < 0) return Bad("--gpus", std::to_string(c.gpus), "a count >= 0");
  if (c.train_subset < 0 || c.val_subset < 0) {
    return absl::InvalidArgumentError("--train-subset/--val-subset: must be >= 0");
  }
  if (c.dataset != "fashion-mnist" && c.dataset != "synthetic") {
    return Bad("--dataset", c.dataset, "fashion-mnist or synthetic");
  }
  return c;
}

// The first n examples of `d` (a Dataset or ImageBytes), every one when n <= 0.
template <class Examples>
Dataset Head(const Examples& d, int64_t n) {
  std::vector<int64_t> idx(static_cast<size_t>(n > 0 ? std::min(n, d.size()) : d.size()));
  std::iota(idx.begin(), idx.end(), 0);
  return d.Subset(idx);
}

// OpenMP threads that spin at barriers lose their core to any other busy process and then stall
// the whole step (measured 3-10x slower on a shared 2-core machine); sleeping costs little.
// libgomp reads OMP_WAIT_POLICY when it is loaded, before main, so the process re-executes
// itself once with the variable set. An explicit setting in the environment wins.
void ReexecWithPassiveOpenMpWaits() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args = absl::StrSplit(all, '\0');
  if (!args.empty() && args.back().empty()) args.pop_back();
  if (args.empty()) return;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  setenv("OMP_WAIT_POLICY", "passive", 1);
  std::fflush(nullptr);
  execv("/proc/self/exe", argv.data());
  // Only reached when exec failed: carry on with the runtime's default waits.
}

int Fail(int code, const absl::Status& s) {
  std::cerr << "sextant-train: " << s.message() << "\n";
  return code;
}

// The command line from argv, with $SEXTANT_FIDELITY applied. -h/--help prints the usage and
// sets *help_exit to the exit code. InvalidArgument naming the flag when the command line is bad.
absl::StatusOr<CommandLine> ParseCommandLine(CLI::App& app, int argc, char** argv,
                                             std::optional<int>* help_exit) {
  absl::StatusOr<CommandLine> parsed;
  try {
    app.parse(argc, argv);
    parsed = ToCommandLine(app);
  } catch (const CLI::CallForHelp& e) {
    *help_exit = app.exit(e);
    return parsed;
  } catch (const CLI::ArgumentMismatch& e) {
    // A flag at the end without its value; CLI11's message starts with the flag's name.
    const std::string what = e.what();
    parsed =
        absl::InvalidArgumentError(absl::StrCat(what.substr(0, what.find(':')), " needs a value"));
  } catch (const CLI::ParseError& e) {
    parsed = absl::InvalidArgumentError(e.what());
  }
  // Under a multi-fidelity scheduler the orchestrator sets the epoch to train to; the
  // checkpoint carries the run from the previous rung.
  if (const char* f = std::getenv("SEXTANT_FIDELITY"); parsed.ok() && f != nullptr) {
    double target = 0;
    if (absl::SimpleAtod(f, &target) && target >= 1) {
      parsed->trainer.epochs = static_cast<int>(std::ceil(target));
    }
  }
  return parsed;
}

// FailedPrecondition when --gpus asks for more CUDA devices than this build and host have.
absl::Status CheckGpus(int gpus) {
  if (gpus <= 0) return absl::OkStatus();
  const size_t found = QueryGpus().size();
  if (BuiltWithCuda() && found >= static_cast<size_t>(gpus)) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("no CUDA device available: --gpus ", gpus, " requires ", gpus,
                   " visible CUDA device(s) and a build with CUDA (built with CUDA: ",
                   BuiltWithCuda() ? "yes" : "no", ", devices found: ", found,
                   "); use --gpus 0 for the CPU backend"));
}

// The training and validation sets the command line names, with the model shaped to them.
absl::Status LoadData(CommandLine& c, Dataset* train, Dataset* validation) {
  if (c.dataset == "synthetic") {
    *train = MakeSyntheticDataset(c.train_subset > 0 ? c.train_subset : 6000, c.trainer.seed + 1);
    *validation = MakeSyntheticDataset(c.val_subset > 0 ? c.val_subset : 1000, c.trainer.seed + 2);
  } else {
    absl::StatusOr<FashionMnist> data = LoadFashionMnist(c.data_dir);
    if (!data.ok()) return data.status();
    *train = Head(data->train, c.train_subset);
    *validation = Head(data->validation, c.val_subset);
  }
  c.trainer.model.channels = train->channels;
  c.trainer.model.height = train->height;
  c.trainer.model.width = train->width;
  c.trainer.model.classes = train->num_classes;
  return absl::OkStatus();
}

// SIGTERM stops the trainer at its next step boundary; each epoch's metrics and each event go
// to stdout as they happen.
void ConnectOutputs(TrainerOptions& t) {
  struct sigaction action = {};
  action.sa_handler = OnTerm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  t.stop = &g_stop_requested;
  t.on_epoch = [fidelity = t.fidelity_name](const EpochMetrics& m) {
    std::printf("%s\n", m.Format(fidelity).c_str());
    std::fflush(stdout);
  };
  // On stdout, in order with the metrics: sextant-worker records them as the trial's events.
  t.on_event = [](const TrainEvent& e) {
    std::printf("sextant-event: %s\n", e.Format().c_str());
    std::fflush(stdout);
  };
}

// What a run trains on; it outlives the training.
struct Backends {
  std::unique_ptr<Backend> primary;  // the CPU backend, or the first GPU's
  std::vector<std::unique_ptr<Backend>> replicas;
  std::unique_ptr<cuda::GradientAllReduce> all_reduce;
};

// One replica per GPU, all in this process; gradients are summed with NCCL. One GPU takes the
// same path with nothing to sum. Without --gpus, the CPU backend. Fills in the trainer's
// replicas and gradient sum.
absl::Status MakeBackends(CommandLine& c, Backends* b) {
  if (c.gpus <= 0) {
    b->primary = NewCpuBackend({.threads = c.threads, .memory_limit_bytes = 0});
    return absl::OkStatus();
  }
  for (int d = 0; d < c.gpus; ++d) {
    auto gpu = cuda::NewCudaBackend({.device = d});
    if (!gpu.ok()) return gpu.status();
    if (d == 0) {
      b->primary = *std::move(gpu);
    } else {
      c.trainer.replicas.push_back(gpu->get());
      b->replicas.push_back(*std::move(gpu));
    }
  }
  if (c.gpus > 1) {
    std::vector<Backend*> all = {b->primary.get()};
    all.insert(all.end(), c.trainer.replicas.begin(), c.trainer.replicas.end());
    auto reduce = cuda::NewGradientAllReduce(all);
    if (!reduce.ok()) return reduce.status();
    b->all_reduce = *std::move(reduce);
    c.trainer.all_reduce_sum =
        [all_reduce = b->all_reduce.get()](const std::vector<std::vector<Tensor>>& grads) {
          return all_reduce->SumInPlace(grads);
        };
  }
  return absl::OkStatus();
}

// The exit code of a finished Train call, with its notes on stderr.
int ExitCode(const absl::StatusOr<TrainResult>& result, const TrainerOptions& t) {
  if (!result.ok()) {
    return Fail(absl::IsInvalidArgument(result.status()) ? kTrainExitBadArgs : kTrainExitFailed,
                result.status());
  }
  if (result->resumed_from_step >= 0) {
    std::fprintf(stderr, "sextant-train: resumed from the checkpoint at step %lld\n",
                 static_cast<long long>(result->resumed_from_step));
  }
  if (result->outcome == TrainResult::Outcome::kPreempted) {
    std::fprintf(stderr, "sextant-train: preempted at step %lld; checkpoint in %s\n",
                 static_cast<long long>(result->steps),
                 t.checkpoint_dir.empty() ? "(none)" : t.checkpoint_dir.c_str());
    return kTrainExitPreempted;
  }
  return kTrainExitOk;
}

}  // namespace

int RunTrainCommand(int argc, char** argv) {
  ReexecWithPassiveOpenMpWaits();
  // argv[0] is "train" under `sextant-worker train`.
  const std::string command =
      argc > 0 && std::string(argv[0]) == "train" ? "sextant-worker train" : "sextant-train";
  CLI::App app(
      "Trains a model with the built-in trainer and prints one metrics line per epoch "
      "on stdout.",
      command);
  app.footer(
      "Flags also take the --name=value form. $SEXTANT_CHECKPOINT_DIR is the default "
      "--checkpoint-dir; $SEXTANT_FIDELITY (>= 1), when set, is the epoch to train to. "
      "SIGTERM checkpoints and exits 75.");
  // Left-over arguments are kept, so that ToCommandLine can name the unknown flag.
  app.allow_extras();
  AddFlags(app);
  std::optional<int> help_exit;
  absl::StatusOr<CommandLine> parsed = ParseCommandLine(app, argc, argv, &help_exit);
  if (help_exit) return *help_exit;
  if (!parsed.ok()) {
    std::cerr << "sextant-train: " << parsed.status().message() << "\nRun '" << command
              << " --help' for usage.\n";
    return kTrainExitBadArgs;
  }
  CommandLine& c = *parsed;
  if (auto s = ValidateTrainerOptions(c.trainer); !s.ok()) return Fail(kTrainExitBadArgs, s);
  if (auto s = CheckGpus(c.gpus); !s.ok()) return Fail(kTrainExitFailed, s);
  Dataset train, validation;
  if (auto s = LoadData(c, &train, &validation); !s.ok()) return Fail(kTrainExitFailed, s);
  ConnectOutputs(c.trainer);
  Backends backends;
  if (auto s = MakeBackends(c, &backends); !s.ok()) return Fail(kTrainExitFailed, s);
  return ExitCode(Train(c.trainer, train, validation, backends.primary.get()), c.trainer);
}

}  // namespace sextant::train
