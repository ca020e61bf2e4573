#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_EVALUATOR_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_EVALUATOR_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "aggregator/model_evaluation.h"
#include "common/clock.h"
#include "orchestrator/core/local_launcher.h"
#include "tensors/tensor_file.h"

namespace sextant {

// The global model's evaluation, done by a `sextant-worker --role evaluator` process (the only
// place the trainer runs), through the files of aggregator/model_evaluation.h. Not thread-safe;
// runs on the federated run's loop.
class GlobalEvaluator {
 public:
  // Launches argv (an evaluator command line whose --work-dir is dir) with its output in
  // log_path and waits up to startup_timeout for the model's initial weights (a safetensors
  // file; its errors are returned as ReadSafetensors gives them). Unavailable
  // naming the log when the process exits first; DeadlineExceeded when it takes longer.
  // clock (not owned) times every wait of the evaluator and must outlive it; default: the
  // real clock.
  static absl::StatusOr<std::unique_ptr<GlobalEvaluator>> Start(
      ProcessLauncher* launcher, const std::vector<std::string>& argv, const std::string& dir,
      const std::string& log_path, absl::Duration startup_timeout,
      Clock* clock = RealClockInstance());
  ~GlobalEvaluator();  // stops the process

  // The model's seeded starting weights, flat (tensors/tensor_file.h), and its named tensors
  // (their data empty).
  const std::vector<float>& initial_weights() const { return initial_; }
  const TensorFile& layout() const { return layout_; }

  // The validation score of weights (the model after `round`). Unavailable naming the log when
  // the process exited; DeadlineExceeded after timeout; InvalidArgument for a wrong length.
  absl::StatusOr<ModelScore> Evaluate(int64_t round, absl::Span<const float> weights,
                                      absl::Duration timeout);

 private:
  GlobalEvaluator(ProcessLauncher* launcher, Clock* clock, pid_t pid, std::string dir,
                  std::string log_path)
      : launcher_(launcher),
        clock_(clock),
        pid_(pid),
        files_{std::move(dir)},
        log_path_(std::move(log_path)) {}
  // Unavailable (naming the log) once the process has exited.
  absl::Status CheckAlive();

  ProcessLauncher* launcher_;
  Clock* clock_;
  pid_t pid_;
  bool exited_ = false;
  EvaluationFiles files_;
  std::string log_path_;
  std::vector<float> initial_;
  TensorFile layout_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_EVALUATOR_H_
