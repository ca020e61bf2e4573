#ifndef SEXTANT_COMMON_COMMAND_METRICS_H_
#define SEXTANT_COMMON_COMMAND_METRICS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/clock.h"
#include "common/command_runner.h"

namespace sextant {

// How a command that reports on a model ended: the federated command client's round
// (worker/federated/command_trainer.h) and the orchestrator's federation.evaluate_command.
struct MetricsCommandResult {
  CommandResult command;
  std::map<std::string, double> last;  // each metric's last printed value
};

// Runs spec (RunCommand), keeping the last value of each name=value metric on stdout.
// Errors as RunCommand's: only when the capture files cannot be opened.
absl::StatusOr<MetricsCommandResult> RunCommandForMetrics(const CommandSpec& spec, Clock* clock);

// OK when the command exited 0; otherwise FailedPrecondition "WHAT exited with status 3" (timed
// out after Ns, killed by signal, or why it could not start), with the end of its stderr.
absl::Status CommandExitStatus(const CommandResult& result, absl::string_view what);

// A model's evaluation as a command printed it: eval_loss=X eval_accuracy=Y [eval_examples=N].
struct PrintedEvaluation {
  double loss = 0;
  double accuracy = 0;
  int64_t examples = 0;  // eval_examples, or the default given to EvaluationFrom
};

// The evaluation in `last` when it holds a finite eval_loss and eval_accuracy, else nullopt.
// examples is eval_examples when printed, else default_examples (a non-finite or negative
// count is 0).
std::optional<PrintedEvaluation> EvaluationFrom(const std::map<std::string, double>& last,
                                                double default_examples);

}  // namespace sextant

#endif  // SEXTANT_COMMON_COMMAND_METRICS_H_
