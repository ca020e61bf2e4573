#include "worker/federated/command_trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/command_runner.h"
#include "worker/federated/npy.h"

namespace sextant {
namespace {

// Keeps the last value of the two metrics the command client reads.
class RoundObserver : public CommandObserver {
 public:
  void OnMetrics(const std::map<std::string, double>& metrics, double) override {
    if (auto it = metrics.find("num_examples"); it != metrics.end()) num_examples = it->second;
    if (auto it = metrics.find("train_loss"); it != metrics.end()) train_loss = it->second;
  }
  double num_examples = -1;
  double train_loss = 0;
};

}  // namespace

absl::StatusOr<CommandTrainer> CommandTrainer::Create(CommandTrainerOptions options, Clock* clock) {
  if (options.argv.empty()) return absl::InvalidArgumentError("the client command is empty");
  if (options.work_dir.empty()) return absl::InvalidArgumentError("work_dir is empty");
  std::error_code ec;
  std::filesystem::create_directories(options.work_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(options.work_dir, ": ", ec.message()));
  return CommandTrainer(std::move(options), clock);
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
  if (updated.size() != global.size()) {
    return absl::InvalidArgumentError("updated and global differ in size");
  }
  const std::string in = options_.work_dir + "/global.npy";
  const std::string out = options_.work_dir + "/updated.npy";
  std::filesystem::remove(out);  // a stale file must not pass for this round's weights
  SEXTANT_RETURN_IF_ERROR(WriteNpy(in, global));
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
  absl::StatusOr<NpyArray> read = ReadNpy(out);
  if (absl::IsNotFound(read.status())) {
    return absl::InvalidArgumentError(absl::StrCat("the client command wrote no weights to ", out));
  }
  SEXTANT_ASSIGN_OR_RETURN(NpyArray weights, std::move(read));
  if (weights.data.size() != global.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the client command wrote ", weights.data.size(),
                                                   " weights; the model has ", global.size()));
  }
  std::copy(weights.data.begin(), weights.data.end(), updated.begin());
  CommandRoundResult result;
  result.num_examples = static_cast<int64_t>(observer.num_examples);
  result.train_loss = observer.train_loss;
  return result;
}

}  // namespace sextant
