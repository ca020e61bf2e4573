// `sextant-worker train` / `sextant-train`: runs the built-in trainer from the command line and
// prints one `name=value` metrics line per epoch on stdout.
#ifndef SEXTANT_WORKER_TRAIN_TRAIN_COMMAND_H_
#define SEXTANT_WORKER_TRAIN_TRAIN_COMMAND_H_

namespace sextant::train {

// Exit codes of RunTrainCommand.
inline constexpr int kTrainExitOk = 0;
inline constexpr int kTrainExitFailed = 1;      // training failed (diverged, out of memory, I/O)
inline constexpr int kTrainExitBadArgs = 2;     // bad arguments or options
inline constexpr int kTrainExitPreempted = 75;  // EX_TEMPFAIL: stopped by SIGTERM after a
                                                // checkpoint; run again to resume

// argv[0] is the command name ("train"); the options follow:
//   --model mlp|cnn  --dataset fashion-mnist|synthetic  --epochs N  --batch-size N
//   --hidden 512,256  --optimizer adam|sgd  --lr X  [--dropout P] [--weight-decay X]
//   [--momentum X] [--seed N] [--threads N] [--gpus N] [--checkpoint-dir DIR]
//   [--checkpoint-every STEPS] [--memory-cap-mb N] [--fidelity-name epoch] [--nan-patience N]
//   [--max-steps N] [--train-subset N] [--val-subset N] [--data-dir DIR] [--depth N]
// Options also take the --name=value form; a repeated one keeps its last value. Parsed with
// CLI11: -h/--help lists them on stdout and returns kTrainExitOk. An unknown option, a missing
// value or a bad one prints "sextant-train: " and a message naming the option on stderr and
// returns kTrainExitBadArgs. --checkpoint-dir defaults to $SEXTANT_CHECKPOINT_DIR.
// Each epoch prints "<fidelity>=E train_loss=.. val_loss=.. val_accuracy=.. samples_per_sec=.."
// to stdout (flushed); events go to stdout too, in order with the metrics, as
// "sextant-event: oom micro_batch=64 reason=...". Errors go to stderr.
// SIGTERM makes the trainer checkpoint at the next step boundary and exit kTrainExitPreempted.
// $SEXTANT_FIDELITY (>= 1), when set, is the epoch to train to (overriding --epochs).
// Unless OMP_WAIT_POLICY is set, re-executes the process (same arguments, via /proc/self/exe)
// with OMP_WAIT_POLICY=passive, which the OpenMP runtime only reads at load time.
// --gpus 1 trains on the CUDA backend; --gpus N > 0 fails (kTrainExitFailed) when fewer than N
// CUDA devices are usable, and N > 1 is not supported yet.
int RunTrainCommand(int argc, char** argv);

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_TRAIN_COMMAND_H_
