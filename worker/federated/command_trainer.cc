#include "worker/federated/command_trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tensors/safetensors.h"
#include "common/command_metrics.h"
#include "worker/federated/npy.h"

namespace sextant {

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
  // A chunk at a time, in the layout's order whatever the file's; the layout is checked first.
  const absl::Status s = ReadSafetensorsToF32(path, options_.layout, updated);
  if (absl::IsNotFound(s)) {
    return absl::InvalidArgumentError(absl::StrCat("the client command wrote no model to ", path));
  }
  if (!s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the client command's model is refused: ", s.message()));
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
  SEXTANT_RETURN_IF_ERROR(WriteSafetensorsFromF32(in, options_.layout, global));
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
  SEXTANT_ASSIGN_OR_RETURN(MetricsCommandResult r, RunCommandForMetrics(spec, clock_));
  SEXTANT_RETURN_IF_ERROR(CommandExitStatus(r.command, "client command"));
  auto num = r.last.find("num_examples");
  const double examples = num != r.last.end() ? num->second : -1;
  if (!(examples >= 1) || examples != std::floor(examples)) {
    return absl::InvalidArgumentError(
        "the client command printed no num_examples=N line (N >= 1, the examples it trained on)");
  }
  if (options_.max_examples > 0 && examples > static_cast<double>(options_.max_examples)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the client command reported num_examples=", examples, ", more than ",
        options_.max_examples,
        ", the most one client's update may weigh (federation.examples_per_client, 60000 when "
        "unset; the aggregators refuse more); declare the cap there"));
  }
  SEXTANT_RETURN_IF_ERROR(ReadUpdated(out, updated));
  CommandRoundResult result;
  result.num_examples = static_cast<int64_t>(examples);
  if (auto it = r.last.find("train_loss"); it != r.last.end()) result.train_loss = it->second;
  if (std::optional<PrintedEvaluation> e = EvaluationFrom(r.last, examples)) {
    result.eval_loss = e->loss;
    result.eval_accuracy = e->accuracy;
    result.eval_examples = e->examples;
  }
  return result;
}

}  // namespace sextant
