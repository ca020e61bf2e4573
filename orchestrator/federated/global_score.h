#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_SCORE_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_SCORE_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "aggregator/model_evaluation.h"
#include "common/clock.h"
#include "federation/round_coordinator.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/core/store.h"
#include "orchestrator/federated/global_evaluator.h"
#include "orchestrator/federated/global_model.h"
#include "sextant/v1/experiment.pb.h"

namespace sextant {

// Where the global score's processes run and what they read. Nothing is owned; everything
// must outlive the GlobalScore.
struct GlobalScoreEnv {
  ProcessLauncher* launcher;
  Clock* clock;
  Store* store;       // evaluate_failed events
  std::ostream* err;  // and their lines
  std::string worker_binary;  // the evaluator is `sextant-worker --role evaluator`
  std::string spec_file;      // the experiment, as the evaluator reads it
  std::string fed_dir;        // the federation folder: eval/ and evaluate/ go in it
  std::string logs_dir;
  std::string source_dir;  // the experiment file's folder: evaluate_command runs there
};

// The global model's score after each round, from the first that applies: the evaluator
// process (the built-in model, which also gives the starting weights), or
// federation.evaluate_command, or else the clients' own evaluations of the model they
// received, weighted by their examples. Not thread-safe; runs on the run's loop.
class GlobalScore {
 public:
  GlobalScore(const v1::Federation& fed, GlobalScoreEnv env) : fed_(fed), env_(std::move(env)) {}

  // The built-in model: starts the evaluator process, which gives the model's starting
  // weights and layout (evaluator()). GlobalEvaluator::Start's errors.
  absl::Status StartEvaluator();
  const GlobalEvaluator* evaluator() const { return evaluator_.get(); }

  // Round `round` completed with the clients' `metrics` over `model`: scores it when the
  // round is one to evaluate (federation.eval_every, and the last). The evaluator's error; a
  // failed evaluate_command is reported instead (an evaluate_failed event and a line) and the
  // clients' score stands.
  absl::Status AfterRound(int64_t round, const SenderMetrics& metrics, GlobalModel& model);
  // A resumed run's last score: the clients' of its committed round (no one can compute it
  // again) when there is no evaluator.
  void Restore(const ModelScore& clients);
  // A resumed run that ends at once has no score yet: the evaluator scores `model` again (best
  // effort; without one nothing changes).
  void EvaluateAgainIfNone(int64_t round, absl::Span<const float> model);

  const ModelScore& last() const { return last_; }

 private:
  absl::Status Evaluate(int64_t round, absl::Span<const float> model);
  void RunEvaluateCommandOn(int64_t round, GlobalModel& model);
  double EventTime() const;

  const v1::Federation& fed_;
  GlobalScoreEnv env_;
  std::unique_ptr<GlobalEvaluator> evaluator_;
  ModelScore last_;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_SCORE_H_
