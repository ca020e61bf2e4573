#ifndef SEXTANT_WORKER_FEDERATED_LOCAL_TRAINER_H_
#define SEXTANT_WORKER_FEDERATED_LOCAL_TRAINER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/train/backend.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"

namespace sextant {

struct LocalTrainingOptions {
  int epochs = 1;           // local epochs, >= 1. Default 1.
  int64_t batch_size = 32;  // >= 1. Default 32.
  float lr = 0.01f;         // plain SGD step size, > 0. Default 0.01.
  double proximal_mu = 0;   // FedProx mu; 0 = FedAvg. Default 0.
  uint64_t seed = 0;        // shuffling and dropout. Default 0.
  // Set (a spot notice, a signal): training ends before its next step, Cancelled. Not owned;
  // default null: never.
  const std::atomic<bool>* stop = nullptr;
};

struct EvalResult {
  double loss = 0;
  double accuracy = 0;
  int64_t examples = 0;
};

// A federated participant's model: the built-in trainer's Model and CPU backend, with its
// parameters seen as one flat float vector (the order of Model::parameters()). It loads the
// global model, trains locally from it with plain SGD (plus FedProx's proximal gradient) and
// evaluates. Not thread-safe.
class LocalTrainer {
 public:
  // Builds the model with weights drawn from seed. Errors as train::NewModel.
  static absl::StatusOr<std::unique_ptr<LocalTrainer>> Create(const train::ModelSpec& spec,
                                                              uint64_t seed, int threads = 1);

  int64_t size() const { return size_; }
  // Copies the flat parameters to out (size() floats). InvalidArgument for a wrong length.
  absl::Status GetWeights(absl::Span<float> out);
  absl::Status SetWeights(absl::Span<const float> weights);
  // Trains from the current weights on data; returns the mean training loss. With mu > 0,
  // `global` (size() floats) is the proximal anchor. InvalidArgument for bad options or data;
  // Cancelled once options.stop is set.
  absl::StatusOr<double> Train(const train::Dataset& data, const LocalTrainingOptions& options,
                               absl::Span<const float> global = {});
  // Mean loss and accuracy of the current weights on data (empty data: zeros).
  absl::StatusOr<EvalResult> Evaluate(const train::Dataset& data);

 private:
  LocalTrainer() = default;
  absl::Status Reserve(int64_t rows);
  void Stage(const train::Dataset& d, const int64_t* rows, int64_t count);

  train::ModelSpec spec_;
  std::unique_ptr<train::Backend> backend_;
  std::unique_ptr<train::Model> model_;
  train::Buffer dlogits_;
  train::IntBuffer labels_;
  int64_t reserved_ = 0;
  int64_t size_ = 0;
  std::vector<float> host_x_;
  std::vector<int32_t> host_y_;
};

}  // namespace sextant

#endif  // SEXTANT_WORKER_FEDERATED_LOCAL_TRAINER_H_
