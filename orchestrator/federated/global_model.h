#ifndef SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_MODEL_H_
#define SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_MODEL_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/mapped_floats.h"
#include "federation/server_optimizer.h"
#include "orchestrator/federated/privacy_budget.h"
#include "sextant/v1/experiment.pb.h"
#include "tensors/tensor_file.h"

namespace sextant {

// From this many values (256 MB) the global model lives in a mapped file, as the tier stages a
// region's update of that size in a file.
inline constexpr size_t kFileBackedFloats = size_t{1} << 26;

// A federated run's global model: its flat f32 values, in memory or (from kFileBackedFloats
// on) in a file of `dir` mapped into memory whose pages go back to the system after each pass
// (Release), so that a large model is resident only while it is read or written; and its
// layout (named tensors, data empty), for the model files. Not thread-safe.
class GlobalModel {
 public:
  // `dir`: where a large model's file goes (dir/global.f32).
  explicit GlobalModel(std::string dir) : dir_(std::move(dir)) {}

  // n values of zeros.
  absl::Status Allocate(size_t n);
  // The starting weights and their layout (the built-in trainer's).
  absl::Status Adopt(const std::vector<float>& initial, TensorFile layout);
  // federation.model.file: its tensors widened to f32, read a chunk at a time (a model of many
  // gigabytes costs itself once). FailedPrecondition when the file no longer has the layout
  // the loader read from its header.
  absl::Status LoadOwn(const v1::Federation& f);

  absl::Span<float> values() const { return values_; }
  size_t size() const { return values_.size(); }
  const TensorFile& layout() const { return layout_; }
  // True when the values live in a mapped file.
  bool mapped() const { return file_.has_value(); }
  // Gives a mapped model's pages back (all, or `n` values from `at`); no-op in memory.
  void Release();
  void Release(size_t at, size_t n);

  // The model as safetensors at `path` (the layout's names and dtypes), written atomically.
  absl::Status WriteSafetensors(const std::string& path);
  // The same as `model_dir`/`name` (the folder made if missing); returns the file's absolute
  // path.
  absl::StatusOr<std::string> WriteTo(const std::string& model_dir, const std::string& name);

 private:
  std::string dir_;
  absl::Span<float> values_;
  std::vector<float> memory_;
  std::optional<MappedFloats> file_;
  TensorFile layout_;
};

// Applies a round's mean (of total_weight) to the model through the server optimizer. With
// central DP (privacy non-null and adding central noise) the noise goes on a copy of the mean;
// otherwise the step reads it in place. A file-backed model is stepped a range at a time, each
// range's pages given back at once.
absl::Status StepGlobalModel(GlobalModel& model, ServerOptimizer& optimizer,
                             absl::Span<const float> mean, double total_weight,
                             PrivacyBudget* privacy);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_FEDERATED_GLOBAL_MODEL_H_
