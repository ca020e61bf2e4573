#include "worker/federated/evaluator.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "aggregator/model_evaluation.h"
#include "common/status_macros.h"
#include "tensors/safetensors.h"
#include "worker/federated/local_trainer.h"
#include "worker/train/dataset.h"

namespace sextant {
namespace {

// The requests waiting in dir, by round.
std::map<int64_t, std::string> Requests(const std::string& dir) {
  std::map<int64_t, std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const int64_t round = RequestRound(e.path().filename().string());
    if (round >= 0) out[round] = e.path().string();
  }
  return out;
}

}  // namespace

absl::Status RunEvaluator(const EvaluatorOptions& o, Clock* clock, const std::atomic<bool>* stop) {
  SEXTANT_ASSIGN_OR_RETURN(std::unique_ptr<LocalTrainer> trainer,
                           LocalTrainer::Create(o.job.model, o.job.seed, o.threads));
  SEXTANT_ASSIGN_OR_RETURN(
      train::FashionMnist data,
      train::LoadFashionMnist(o.job.dataset_dir, o.job.validation_examples, o.job.seed));
  const EvaluationFiles files{o.dir};
  std::filesystem::create_directories(o.dir);
  std::vector<float> weights(static_cast<size_t>(trainer->size()));
  SEXTANT_RETURN_IF_ERROR(trainer->GetWeights(absl::MakeSpan(weights)));
  SEXTANT_ASSIGN_OR_RETURN(TensorFile initial,
                           UnflattenFromF32(BuiltinModelLayout(o.job.model), weights));
  SEXTANT_RETURN_IF_ERROR(WriteSafetensors(files.initial(), initial));
  { std::ofstream(files.ready()) << "model_size=" << trainer->size() << "\n"; }
  while (stop == nullptr || !stop->load()) {
    std::map<int64_t, std::string> requests = Requests(o.dir);
    if (requests.empty()) {
      clock->SleepFor(absl::Milliseconds(o.poll_ms));
      continue;
    }
    for (const auto& [round, path] : requests) {
      SEXTANT_ASSIGN_OR_RETURN(std::vector<float> model, ReadFloats(path, trainer->size()));
      SEXTANT_RETURN_IF_ERROR(trainer->SetWeights(model));
      SEXTANT_ASSIGN_OR_RETURN(EvalResult r, trainer->Evaluate(data.validation));
      SEXTANT_RETURN_IF_ERROR(
          WriteScore(files.score(round), ModelScore{r.loss, r.accuracy, r.examples}));
      std::filesystem::remove(path);
    }
  }
  return absl::OkStatus();
}

}  // namespace sextant
