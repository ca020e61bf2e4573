// How the global tier has its model evaluated without linking a trainer: a separate process
// (`sextant-worker --role evaluator`, which holds the model and the validation split) and the
// orchestrator exchange files in one folder. The evaluator writes initial.safetensors (the
// model's starting weights as named tensors, tensors/safetensors.h) and then `ready`; for each
// request the orchestrator writes eval-R.f32 (the weights after round R) and the evaluator answers
// eval-R.score. Every file is written under a temporary name and renamed, so a reader never sees
// half of one.
#ifndef SEXTANT_AGGREGATOR_MODEL_EVALUATION_H_
#define SEXTANT_AGGREGATOR_MODEL_EVALUATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sextant {

// A model's loss and accuracy on the validation split (examples: how many were scored).
struct ModelScore {
  double loss = 0;
  double accuracy = 0;
  int64_t examples = 0;
};

// The file names of the exchange in dir.
struct EvaluationFiles {
  std::string dir;
  std::string initial() const { return dir + "/initial.safetensors"; }
  std::string ready() const { return dir + "/ready"; }
  std::string request(int64_t round) const;  // eval-R.f32
  std::string score(int64_t round) const;    // eval-R.score
};

// Writes values (native float32) to path through path.tmp and a rename. Internal naming the
// file on an I/O error.
absl::Status WriteFloatsAtomically(const std::string& path, absl::Span<const float> values);
// Reads a float32 file. DataLoss naming the file when it is missing, unreadable, or (with
// expected_size >= 0) of another length.
absl::StatusOr<std::vector<float>> ReadFloats(const std::string& path, int64_t expected_size = -1);

// "loss=L accuracy=A examples=N", written atomically to path.
absl::Status WriteScore(const std::string& path, const ModelScore& score);
// The score in path. NotFound while it does not exist; DataLoss when it does not parse.
absl::StatusOr<ModelScore> ReadScore(const std::string& path);

// The round a request file name (eval-R.f32) is for; -1 for any other name.
int64_t RequestRound(const std::string& file_name);

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_MODEL_EVALUATION_H_
