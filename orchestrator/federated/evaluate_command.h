#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_EVALUATE_COMMAND_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_EVALUATE_COMMAND_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/command_metrics.h"

namespace sextant {

struct EvaluateCommandOptions {
  std::vector<std::string> argv;  // federation.evaluate_command. Required.
  std::string working_dir;        // its cwd (the experiment file's folder); empty = the current
  std::string output_dir;         // where round-N.out and round-N.err are kept. Required.
  double timeout_seconds = 600;   // per evaluation. Default 600.
};

// The user's evaluation of the global model on a validation set the orchestrator holds:
// runs argv (through RunCommand, so a timeout kills its whole process group) with
// SEXTANT_GLOBAL_MODEL=model_path (safetensors) and SEXTANT_ROUND=round, and returns its
// `eval_loss=X eval_accuracy=Y [eval_examples=N]` (examples 1 when not printed).
// FailedPrecondition naming the command when it cannot start, exits non-zero or times out
// (with its exit status and the end of its stderr); InvalidArgument naming the command and its
// last stdout line when it printed no finite eval_loss and eval_accuracy. Blocks the caller
// until the command ends. clock (not owned) times the timeout.
absl::StatusOr<PrintedEvaluation> RunEvaluateCommand(const EvaluateCommandOptions& options,
                                                     int64_t round, const std::string& model_path,
                                                     Clock* clock);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_EVALUATE_COMMAND_H_
