#ifndef SEXTANT_WORKER_FEDERATED_COMMAND_TRAINER_H_
#define SEXTANT_WORKER_FEDERATED_COMMAND_TRAINER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "tensors/tensor_file.h"
#include "worker/train/dataset.h"

namespace sextant {

struct CommandTrainerOptions {
  std::vector<std::string> argv;  // the user's command (federation.client_command). Required.
  std::string work_dir;           // where the files are exchanged. Required.
  std::map<std::string, std::string> env;  // more environment (e.g. the local hyperparameters)
  std::string working_dir;                 // the command's cwd; empty = the current one
  double timeout_seconds = 0;              // per round; 0 = none. Default 0.
  // The largest num_examples the command may report (secure aggregation's max weight,
  // SecAggMaxWeight); 0 = no bound. Default 0.
  int64_t max_examples = 0;
  // The global model's named tensors (their data is ignored): names, dtypes and shapes in the
  // flat order the model travels in (tensors/tensor_file.h). Required.
  TensorFile layout;
};

// What the command reported besides its weights.
struct CommandRoundResult {
  int64_t num_examples = 0;  // its `num_examples=N` line: the update's weight
  double train_loss = 0;     // its `train_loss=X` line, if any
  // Its `eval_loss=X eval_accuracy=Y` of the global model it received, on data of its own, and
  // `eval_examples=N` (default num_examples), their weight; eval_examples 0 when not printed.
  double eval_loss = 0;
  double eval_accuracy = 0;
  int64_t eval_examples = 0;
};

// The command client: lets users federate their own (e.g. PyTorch) training code. Each round the
// global model is written to work_dir/global.safetensors (options.layout's named tensors, each
// holding its slice of the flat f32 model narrowed to its dtype), then argv runs with this
// environment:
//   SEXTANT_GLOBAL_MODEL   the global model (safetensors) to start from
//   SEXTANT_UPDATED_MODEL  where the command must write its trained model (safetensors with
//                          exactly the same tensor names, dtypes and shapes; any order)
//   SEXTANT_TRAIN_X, SEXTANT_TRAIN_Y  the client's data share (WriteClientShare, .npy), if written
//   SEXTANT_ROUND, SEXTANT_SEED       the round and this client's seed for it
//   SEXTANT_DATA_DIR       with data: own, the client's data folder, when it has one (in env)
//   plus options.env (SEXTANT_LR, SEXTANT_EPOCHS, SEXTANT_BATCH_SIZE, SEXTANT_MU from the job).
// The command prints `num_examples=N` (optionally `train_loss=X`, and `eval_loss=X
// eval_accuracy=Y [eval_examples=N]` for the global model it received) on stdout and exits 0.
// The updated model is read back strictly (ReadSafetensors, then CheckSameLayout against the
// layout), widened to f32 and flattened in layout order into `updated`.
// Not thread-safe (one command at a time per work_dir).
class CommandTrainer {
 public:
  // InvalidArgument for an empty argv or work_dir, or a layout whose shapes are invalid. Creates
  // work_dir.
  static absl::StatusOr<CommandTrainer> Create(CommandTrainerOptions options, Clock* clock);

  // Writes the share as work_dir/train_x.npy (n x features) and train_y.npy (n labels as
  // float32) for the command to read; raw data stays on this machine. Internal on I/O errors.
  absl::Status WriteClientShare(const train::Dataset& share);

  // Runs one round (see the class comment). `global` and `updated` must each have the layout's
  // element count of floats. FailedPrecondition when the command cannot start, exits non-zero or
  // times out (with the end of its stderr); InvalidArgument when it printed no positive
  // num_examples= (or one above options.max_examples), wrote no model, or wrote one that is not a
  // valid safetensors file or whose layout differs (the message names the tensor: renamed, missing,
  // extra, other dtype or shape).
  absl::StatusOr<CommandRoundResult> RunRound(int64_t round, uint64_t seed,
                                              absl::Span<const float> global,
                                              absl::Span<float> updated);

 private:
  CommandTrainer(CommandTrainerOptions options, Clock* clock, int64_t size)
      : options_(std::move(options)), clock_(clock), size_(size) {}

  // The updated model in `path`, checked against the layout and flattened into `updated`.
  absl::Status ReadUpdated(const std::string& path, absl::Span<float> updated) const;

  CommandTrainerOptions options_;
  Clock* clock_;
  int64_t size_;  // the layout's element count
  bool share_written_ = false;
};

}  // namespace sextant

#endif  // SEXTANT_WORKER_FEDERATED_COMMAND_TRAINER_H_
