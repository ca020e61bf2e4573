#ifndef SEXTANT_WORKER_FEDERATED_COMMAND_TRAINER_H_
#define SEXTANT_WORKER_FEDERATED_COMMAND_TRAINER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "worker/train/dataset.h"

namespace sextant {

struct CommandTrainerOptions {
  std::vector<std::string> argv;  // the user's command (federation.client_command). Required.
  std::string work_dir;           // where the files are exchanged. Required.
  std::map<std::string, std::string> env;  // more environment (e.g. the local hyperparameters)
  std::string working_dir;                 // the command's cwd; empty = the current one
  double timeout_seconds = 0;              // per round; 0 = none. Default 0.
};

// What the command reported besides its weights.
struct CommandRoundResult {
  int64_t num_examples = 0;  // its `num_examples=N` line: the update's weight
  double train_loss = 0;     // its `train_loss=X` line, if any
};

// The command client: lets users federate their own (e.g. PyTorch) training code. Each round the
// global model is written to work_dir/global.npy (float32, 1-D, the flat parameter order of the
// built-in model), then argv runs with this environment:
//   SEXTANT_GLOBAL_MODEL   the global model (.npy) to start from
//   SEXTANT_UPDATED_MODEL  where the command must write its trained weights (.npy, same shape)
//   SEXTANT_TRAIN_X, SEXTANT_TRAIN_Y  the client's data share (WriteClientShare), if written
//   SEXTANT_ROUND, SEXTANT_SEED       the round and this client's seed for it
//   plus options.env (SEXTANT_LR, SEXTANT_EPOCHS, SEXTANT_BATCH_SIZE, SEXTANT_MU from the job).
// The command prints `num_examples=N` (and optionally `train_loss=X`) on stdout and exits 0.
// The updated weights are read back strictly (ReadNpy) into `updated`.
// Not thread-safe (one command at a time per work_dir).
class CommandTrainer {
 public:
  // InvalidArgument for an empty argv or work_dir. Creates work_dir.
  static absl::StatusOr<CommandTrainer> Create(CommandTrainerOptions options, Clock* clock);

  // Writes the share as work_dir/train_x.npy (n x features) and train_y.npy (n labels as
  // float32) for the command to read; raw data stays on this machine. Internal on I/O errors.
  absl::Status WriteClientShare(const train::Dataset& share);

  // Runs one round (see the class comment). `updated` must have global.size() floats.
  // FailedPrecondition when the command cannot start, exits non-zero or times out (with the
  // end of its stderr); InvalidArgument when it printed no positive num_examples= or its
  // weights are not a float32 .npy of global.size() values.
  absl::StatusOr<CommandRoundResult> RunRound(int64_t round, uint64_t seed,
                                              absl::Span<const float> global,
                                              absl::Span<float> updated);

 private:
  CommandTrainer(CommandTrainerOptions options, Clock* clock)
      : options_(std::move(options)), clock_(clock) {}

  CommandTrainerOptions options_;
  Clock* clock_;
  bool share_written_ = false;
};

}  // namespace sextant

#endif  // SEXTANT_WORKER_FEDERATED_COMMAND_TRAINER_H_
