#include "worker/train/train_command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

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

const char* const kValueFlags[] = {
    "--model", "--dataset", "--epochs", "--batch-size", "--hidden", "--optimizer", "--lr",
    "--dropout", "--weight-decay", "--momentum", "--seed", "--threads", "--gpus",
    "--checkpoint-dir", "--checkpoint-every", "--memory-cap-mb", "--fidelity-name",
    "--nan-patience", "--max-steps", "--train-subset", "--val-subset", "--data-dir", "--depth"};

absl::Status Bad(absl::string_view flag, absl::string_view value, absl::string_view want) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": '", value, "' is not ", want));
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
  if (flag == "--model") t.model.kind = v;
  else if (flag == "--dataset") c.dataset = v;
  else if (flag == "--epochs") return ParseInt(flag, v, &t.epochs);
  else if (flag == "--batch-size") return ParseInt(flag, v, &t.batch_size);
  else if (flag == "--hidden") {
    t.model.hidden.clear();
    for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
      int h = 0;
      if (!absl::SimpleAtoi(part, &h)) return Bad(flag, v, "a comma-separated list of widths");
      t.model.hidden.push_back(h);
    }
  } else if (flag == "--optimizer") t.optimizer.kind = v;
  else if (flag == "--lr") return ParseFloat(flag, v, &t.optimizer.lr);
  else if (flag == "--dropout") return ParseFloat(flag, v, &t.model.dropout);
  else if (flag == "--weight-decay") return ParseFloat(flag, v, &t.optimizer.weight_decay);
  else if (flag == "--momentum") return ParseFloat(flag, v, &t.optimizer.momentum);
  else if (flag == "--seed") return ParseInt(flag, v, &t.seed);
  else if (flag == "--threads") return ParseInt(flag, v, &c.threads);
  else if (flag == "--gpus") return ParseInt(flag, v, &c.gpus);
  else if (flag == "--checkpoint-dir") t.checkpoint_dir = v;
  else if (flag == "--checkpoint-every") return ParseInt(flag, v, &t.checkpoint_every_steps);
  else if (flag == "--memory-cap-mb") {
    int64_t mb = 0;
    if (auto s = ParseInt(flag, v, &mb); !s.ok()) return s;
    if (mb < 0) return Bad(flag, v, "a size >= 0");
    t.memory_cap_bytes = mb * 1024 * 1024;
  } else if (flag == "--fidelity-name") t.fidelity_name = v;
  else if (flag == "--nan-patience") return ParseInt(flag, v, &t.nan_patience);
  else if (flag == "--max-steps") return ParseInt(flag, v, &t.max_steps);
  else if (flag == "--train-subset") return ParseInt(flag, v, &c.train_subset);
  else if (flag == "--val-subset") return ParseInt(flag, v, &c.val_subset);
  else if (flag == "--data-dir") c.data_dir = v;
  else if (flag == "--depth") {
    if (auto s = ParseInt(flag, v, &c.depth); !s.ok()) return s;
    if (c.depth < 1 || c.depth > 64) return Bad(flag, v, "a number of layers in 1..64");
  }
  return absl::OkStatus();
}

absl::StatusOr<CommandLine> Parse(int argc, char** argv) {
  CommandLine c;
  if (const char* dir = std::getenv("SEXTANT_CHECKPOINT_DIR"); dir != nullptr) {
    c.trainer.checkpoint_dir = dir;
  }
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const size_t eq = arg.find('=');
    bool inline_value = false;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      inline_value = true;
    }
    bool known = false;
    for (const char* f : kValueFlags) known = known || arg == f;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown option '", arg, "'"));
    if (!inline_value) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      value = argv[++i];
    }
    if (auto s = Apply(c, arg, value); !s.ok()) return s;
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

Dataset Head(const Dataset& d, int64_t n) {
  if (n <= 0 || n >= d.size()) return d;
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) idx[i] = i;
  return d.Subset(idx);
}

void Usage() {
  std::cerr << "usage: train --model mlp|cnn --dataset fashion-mnist|synthetic --epochs N "
               "--batch-size N --hidden 512,256 --optimizer adam|sgd --lr X [--dropout P] "
               "[--weight-decay X] [--momentum X] [--seed N] [--threads N] [--gpus N] "
               "[--checkpoint-dir DIR] [--checkpoint-every STEPS] [--memory-cap-mb N] "
               "[--fidelity-name NAME] [--nan-patience N] [--max-steps N] [--train-subset N] "
               "[--val-subset N] [--data-dir DIR] [--depth N]\n";
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

}  // namespace

int RunTrainCommand(int argc, char** argv) {
  ReexecWithPassiveOpenMpWaits();
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      Usage();
      return kTrainExitOk;
    }
  }
  absl::StatusOr<CommandLine> parsed = Parse(argc, argv);
  // Under a multi-fidelity scheduler the orchestrator sets the epoch to train to; the
  // checkpoint carries the run from the previous rung.
  if (const char* f = std::getenv("SEXTANT_FIDELITY"); parsed.ok() && f != nullptr) {
    double target = 0;
    if (absl::SimpleAtod(f, &target) && target >= 1) {
      parsed->trainer.epochs = static_cast<int>(std::ceil(target));
    }
  }
  if (!parsed.ok()) {
    Fail(kTrainExitBadArgs, parsed.status());
    Usage();
    return kTrainExitBadArgs;
  }
  CommandLine& c = *parsed;
  if (auto s = ValidateTrainerOptions(c.trainer); !s.ok()) return Fail(kTrainExitBadArgs, s);
  if (c.gpus > 0) {
    const size_t found = QueryGpus().size();
    if (!BuiltWithCuda() || found < static_cast<size_t>(c.gpus)) {
      return Fail(kTrainExitFailed,
                  absl::FailedPreconditionError(absl::StrCat(
                      "no CUDA device available: --gpus ", c.gpus, " requires ", c.gpus,
                      " visible CUDA device(s) and a build with CUDA (built with CUDA: ",
                      BuiltWithCuda() ? "yes" : "no", ", devices found: ", found,
                      "); use --gpus 0 for the CPU backend")));
    }
  }

  Dataset train, validation;
  if (c.dataset == "synthetic") {
    train = MakeSyntheticDataset(c.train_subset > 0 ? c.train_subset : 6000, c.trainer.seed + 1);
    validation = MakeSyntheticDataset(c.val_subset > 0 ? c.val_subset : 1000, c.trainer.seed + 2);
  } else {
    absl::StatusOr<FashionMnist> data = LoadFashionMnist(c.data_dir);
    if (!data.ok()) return Fail(kTrainExitFailed, data.status());
    train = Head(data->train, c.train_subset);
    validation = Head(data->validation, c.val_subset);
  }
  c.trainer.model.channels = train.channels;
  c.trainer.model.height = train.height;
  c.trainer.model.width = train.width;
  c.trainer.model.classes = train.num_classes;

  struct sigaction action = {};
  action.sa_handler = OnTerm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  c.trainer.stop = &g_stop_requested;
  const std::string fidelity = c.trainer.fidelity_name;
  c.trainer.on_epoch = [&](const EpochMetrics& m) {
    std::printf("%s\n", m.Format(fidelity).c_str());
    std::fflush(stdout);
  };
  // On stdout, in order with the metrics: sextant-worker records them as the trial's events.
  c.trainer.on_event = [](const TrainEvent& e) {
    std::printf("sextant-event: %s\n", e.Format().c_str());
    std::fflush(stdout);
  };

  // One replica per GPU, all in this process; gradients are summed with NCCL. One GPU takes the
  // same path with nothing to sum.
  std::unique_ptr<Backend> backend;
  std::vector<std::unique_ptr<Backend>> replicas;
  std::unique_ptr<cuda::GradientAllReduce> all_reduce;
  if (c.gpus > 0) {
    for (int d = 0; d < c.gpus; ++d) {
      auto gpu = cuda::NewCudaBackend({.device = d});
      if (!gpu.ok()) return Fail(kTrainExitFailed, gpu.status());
      if (d == 0) {
        backend = *std::move(gpu);
      } else {
        c.trainer.replicas.push_back(gpu->get());
        replicas.push_back(*std::move(gpu));
      }
    }
    if (c.gpus > 1) {
      std::vector<Backend*> all = {backend.get()};
      all.insert(all.end(), c.trainer.replicas.begin(), c.trainer.replicas.end());
      auto reduce = cuda::NewGradientAllReduce(all);
      if (!reduce.ok()) return Fail(kTrainExitFailed, reduce.status());
      all_reduce = *std::move(reduce);
      c.trainer.all_reduce_sum = [&](const std::vector<std::vector<Tensor>>& grads) {
        return all_reduce->SumInPlace(grads);
      };
    }
  } else {
    backend = NewCpuBackend({.threads = c.threads, .memory_limit_bytes = 0});
  }
  absl::StatusOr<TrainResult> result = Train(c.trainer, train, validation, backend.get());
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
                 c.trainer.checkpoint_dir.empty() ? "(none)" : c.trainer.checkpoint_dir.c_str());
    return kTrainExitPreempted;
  }
  return kTrainExitOk;
}

}  // namespace sextant::train
