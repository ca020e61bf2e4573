// The built-in training loop: epochs of shuffled mini-batches, per-epoch metrics, checkpoints
// with exact resume, micro-batch halving under a memory cap, preemption, divergence detection.
#ifndef SEXTANT_WORKER_TRAIN_TRAINER_H_
#define SEXTANT_WORKER_TRAIN_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "worker/train/backend.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"
#include "worker/train/optimizer.h"

namespace sextant::train {

// Metrics of one finished epoch.
struct EpochMetrics {
  int epoch = 0;               // 1-based: the number of epochs completed
  double train_loss = 0;       // mean loss over the epoch's training examples (dropout on)
  double val_loss = 0;         // mean loss over the validation set (dropout off)
  double val_accuracy = 0;     // fraction of validation examples classified correctly
  double samples_per_sec = 0;  // training examples / seconds spent in training steps

  // "<fidelity_name>=<epoch> train_loss=... val_loss=... val_accuracy=... samples_per_sec=..."
  std::string Format(const std::string& fidelity_name) const;
};

// Something the caller should record, e.g. the micro-batch halving after an out-of-memory.
struct TrainEvent {
  std::string kind;         // "oom"
  int64_t micro_batch = 0;  // the new micro-batch size
  std::string reason;
  // "oom micro_batch=64 reason=..." (the reason with spaces replaced by '_' so it stays a token)
  std::string Format() const;
};

struct TrainerOptions {
  ModelSpec model;
  OptimizerOptions optimizer;
  int64_t batch_size = 128;  // examples per optimiser step, >= 1. Default 128.
  int epochs = 10;           // >= 1. Default 10.
  uint64_t seed = 0;         // initial weights, shuffling and dropout. Default 0.
  // Where checkpoints go and are resumed from. Default "": no checkpoints, no resume.
  std::string checkpoint_dir;
  // Also checkpoint every this many optimiser steps. Default 0: only at epoch ends and on stop.
  int64_t checkpoint_every_steps = 0;
  // Working-memory cap in bytes (parameters, gradients, optimiser state and activations). The
  // micro-batch is halved until the estimate fits. Default 0: no cap.
  int64_t memory_cap_bytes = 0;
  // Fail with "diverged" after this many consecutive steps whose loss is NaN or infinite. Such
  // a step's update is skipped, so a transient bad batch does not poison the weights.
  // Default 3; >= 1.
  int nan_patience = 3;
  std::string fidelity_name = "epoch";  // the key of the epoch counter in Format(). Default.
  // Stop after this many optimiser steps in total (counting steps before a resume), with a
  // checkpoint. Default 0: no limit.
  int64_t max_steps = 0;
  // Checked before each step; when it reads true the trainer checkpoints and returns kPreempted.
  // Default nullptr.
  const std::atomic<bool>* stop = nullptr;
  Clock* clock = nullptr;  // for samples_per_sec. Default nullptr: the real clock.
  std::function<void(const EpochMetrics&)> on_epoch;  // after each epoch. Default none.
  std::function<void(const TrainEvent&)> on_event;    // on each event. Default none.
  // After each optimiser step, with the total step count. Default none.
  std::function<void(int64_t)> on_step;
  // Data parallelism: further backends (e.g. one CUDA backend per extra GPU), each holding a
  // replica of the model that starts from the same weights. Every step's batch is split evenly
  // over the main backend and these, in row order; all_reduce_sum then sums the replicas'
  // gradients in place, and every replica takes the same optimiser step. Evaluation and
  // checkpoints use the main backend. With no replicas (the default) there is one code path
  // with a single shard.
  std::vector<Backend*> replicas;
  // Required with replicas: sums per_replica[r][i] (gradient i of replica r; replica 0 is the
  // main backend) across r, leaving the sum in every replica's tensor. Default none.
  std::function<absl::Status(const std::vector<std::vector<Tensor>>&)> all_reduce_sum;
};

// InvalidArgument naming the field (batch_size, epochs, nan_patience, ...).
absl::Status ValidateTrainerOptions(const TrainerOptions& options);

struct TrainResult {
  enum class Outcome { kCompleted, kPreempted, kStepLimit };
  Outcome outcome = Outcome::kCompleted;
  int epochs_completed = 0;
  int64_t steps = 0;                 // optimiser steps in total, including those before a resume
  int64_t resumed_from_step = -1;    // the checkpoint's step when resumed, else -1
  int64_t micro_batch = 0;           // the micro-batch size in use at the end
  std::vector<EpochMetrics> epochs;  // the epochs finished in this call
  std::vector<TrainEvent> events;
  std::vector<std::vector<float>> parameters;  // final parameter values, as Model::parameters()
};

// Trains a model of options.model on `train`, evaluating on `validation` after each epoch.
// When checkpoint_dir holds a valid checkpoint of the same configuration, training continues
// from it, and the final weights are bit-identical to those of an uninterrupted run.
// Errors: InvalidArgument for bad options or datasets that do not match the model;
// PermissionDenied/other errors naming the directory when checkpoints cannot be written;
// ResourceExhausted when even a micro-batch of 1 does not fit; Internal "diverged: ..." after
// nan_patience consecutive non-finite losses; DataLoss for a checkpoint of another config.
absl::StatusOr<TrainResult> Train(const TrainerOptions& options, const Dataset& train,
                                  const Dataset& validation, Backend* backend);

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_TRAINER_H_
