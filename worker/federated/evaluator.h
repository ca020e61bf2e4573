#ifndef SEXTANT_WORKER_FEDERATED_EVALUATOR_H_
#define SEXTANT_WORKER_FEDERATED_EVALUATOR_H_

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "worker/federated/federated_job.h"

namespace sextant {

struct EvaluatorOptions {
  FederatedJob job;    // the model, its seed and the validation split. Required.
  std::string dir;     // the exchange folder (aggregator/model_evaluation.h). Required.
  int threads = 2;     // Default 2.
  double poll_ms = 1;  // how often the folder is looked at. Default 1.
};

// `sextant-worker --role evaluator`: the global tier's evaluator. Builds the job's model (seeded
// weights), loads the validation split, writes initial.safetensors (BuiltinModelLayout's named
// tensors) and `ready`, then answers each
// eval-R.f32 that appears with eval-R.score (lowest round first) and removes the request.
// Returns OK when *stop reads true; the model or data's error when they cannot be built;
// DataLoss for a request of the wrong size (answered by no score: the orchestrator waits on
// the process and reports its log). clock (not owned) paces the polling and must outlive the
// call.
absl::Status RunEvaluator(const EvaluatorOptions& options, Clock* clock,
                          const std::atomic<bool>* stop);

}  // namespace sextant

#endif  // SEXTANT_WORKER_FEDERATED_EVALUATOR_H_
