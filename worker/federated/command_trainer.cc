#include "worker/federated/command_trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tensors/safetensors.h"
#include "worker/command_runner.h"
#include "worker/federated/npy.h"

namespace sextant {
namespace {

// Keeps the last value of each metric the command client reads.
class RoundObserver : public CommandObserver {
 public:
  void OnMetrics(const std::map<std::string, double>& metrics, double) override {
    auto take = [&](const char* name, double& out) {
      if (auto it = metrics.find(name); it != metrics.end()) out = it->second;
    };
    take("num_examples", num_examples);
    take("train_loss", train_loss);
    take("eval_loss", eval_loss);
    take("eval_accuracy", eval_accuracy);
    take("eval_examples", eval_examples);
  }
  double num_examples = -1;
  double train_loss = 0;
  double eval_loss = std::nan("");
  double eval_accuracy = std::nan("");
  double eval_examples = -1;
};

// The evaluation the command reported, if it printed a finite eval_loss and eval_accuracy.
void TakeEvaluation(const RoundObserver& o, CommandRoundResult& result) {
  if (!std::isfinite(o.eval_loss) || !std::isfinite(o.eval_accuracy)) return;
  result.eval_loss = o.eval_loss;
  result.eval_accuracy = o.eval_accuracy;
  const double n = o.eval_examples >= 0 ? o.eval_examples : o.num_examples;
  result.eval_examples = std::isfinite(n) ? static_cast<int64_t>(std::max(0.0, n)) : 0;
}

}  // namespace

absl::StatusOr<CommandTrainer> CommandTrainer::Create(CommandTrainerOptions options, Clock* clock) {
  if (options.argv.empty()) return absl::InvalidArgumentError("the client command is empty");
  if (options.work_dir.empty()) return absl::InvalidArgumentError("work_dir is empty");
  SEXTANT_ASSIGN_OR_RETURN(const int64_t size, LayoutElements(options.layout));
  std::error_code ec;
  std::filesystem::create_directories(options.work_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(options.work_dir, ": ", ec.message()));
  return CommandTrainer(std::move(options), clock, size);
}

absl::Status CommandTrainer::ReadUpdated(const std::string& path, absl::Span<float> updated) const {
  absl::StatusOr<TensorFile> model = ReadSafetensors(path);
  if (absl::IsNotFound(model.status())) {
    return absl::InvalidArgumentError(absl::StrCat("the client command wrote no model to ", path));
  }
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the client command's model is refused: ", model.status().message()));
  }
  if (absl::Status s = CheckSameLayout(*model, options_.layout); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the client command's model is refused: ", path, ": ", s.message()));
  }
  // The file may list its tensors in any order; the flat model follows the layout's.
  absl::flat_hash_map<absl::string_view, const Tensor*> by_name;
  for (const Tensor& t : model->tensors) by_name[t.name] = &t;
  size_t at = 0;
  for (const Tensor& l : options_.layout.tensors) {
    const Tensor& t = *by_name.at(l.name);
    const size_t n = static_cast<size_t>(*NumElements(l.shape));
    SEXTANT_RETURN_IF_ERROR(DecodeToF32(t.dtype, t.data, updated.subspan(at, n)));
    at += n;
  }
  return absl::OkStatus();
}

absl::Status CommandTrainer::WriteClientShare(const train::Dataset& share) {
  const int64_t n = share.size();
  const int64_t features = share.x.cols();
  SEXTANT_RETURN_IF_ERROR(WriteNpy(options_.work_dir + "/train_x.npy",
                                   absl::MakeConstSpan(share.x.data(), n * features),
                                   {n, features}));
  std::vector<float> labels(share.y.begin(), share.y.end());
  SEXTANT_RETURN_IF_ERROR(WriteNpy(options_.work_dir + "/train_y.npy", labels));
  share_written_ = true;
  return absl::OkStatus();
}

absl::StatusOr<CommandRoundResult> CommandTrainer::RunRound(int64_t round, uint64_t seed,
                                                            absl::Span<const float> global,
                                                            absl::Span<float> updated) {
  if (static_cast<int64_t>(global.size()) != size_ ||
      static_cast<int64_t>(updated.size()) != size_) {
    return absl::InvalidArgumentError(absl::StrCat("global and updated must hold the model's ",
                                                   size_, " values; they hold ", global.size(),
                                                   " and ", updated.size()));
  }
  const std::string in = options_.work_dir + "/global.safetensors";
  const std::string out = options_.work_dir + "/updated.safetensors";
  std::filesystem::remove(out);  // a stale file must not pass for this round's weights
  SEXTANT_ASSIGN_OR_RETURN(const TensorFile model, UnflattenFromF32(options_.layout, global));
  SEXTANT_RETURN_IF_ERROR(WriteSafetensors(in, model));
  CommandSpec spec;
  spec.argv = options_.argv;
  spec.env = options_.env;
  spec.env["SEXTANT_GLOBAL_MODEL"] = in;
  spec.env["SEXTANT_UPDATED_MODEL"] = out;
  spec.env["SEXTANT_ROUND"] = absl::StrCat(round);
  spec.env["SEXTANT_SEED"] = absl::StrCat(seed);
  if (share_written_) {
    spec.env["SEXTANT_TRAIN_X"] = options_.work_dir + "/train_x.npy";
    spec.env["SEXTANT_TRAIN_Y"] = options_.work_dir + "/train_y.npy";
  }
  spec.stdout_path = absl::StrCat(options_.work_dir, "/round-", round, ".out");
  spec.stderr_path = absl::StrCat(options_.work_dir, "/round-", round, ".err");
  spec.timeout_seconds = options_.timeout_seconds;
  spec.working_dir = options_.working_dir;
  RoundObserver observer;
  SEXTANT_ASSIGN_OR_RETURN(CommandResult r, RunCommand(spec, &observer, clock_));
  if (r.spawn_failed || r.timed_out || r.exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "client command ", r.timed_out ? "timed out" : r.error, "; stderr: ", r.stderr_tail));
  }
  if (!(observer.num_examples >= 1) || observer.num_examples != std::floor(observer.num_examples)) {
    return absl::InvalidArgumentError(
        "the client command printed no num_examples=N line (N >= 1, the examples it trained on)");
  }
  SEXTANT_RETURN_IF_ERROR(ReadUpdated(out, updated));
  CommandRoundResult result;
  result.num_examples = static_cast<int64_t>(observer.num_examples);
  result.train_loss = observer.train_loss;
  TakeEvaluation(observer, result);
  return result;
}

}  // namespace sextant
