#include "orchestrator/federated/global_evaluator.h"

#include <signal.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tensors/safetensors.h"

namespace sextant {
namespace {
constexpr absl::Duration kPoll = absl::Milliseconds(1);
}  // namespace

absl::StatusOr<std::unique_ptr<GlobalEvaluator>> GlobalEvaluator::Start(
    ProcessLauncher* launcher, const std::vector<std::string>& argv, const std::string& dir,
    const std::string& log_path, absl::Duration startup_timeout, Clock* clock) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // no request or score of an earlier process
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  SEXTANT_ASSIGN_OR_RETURN(pid_t pid, launcher->Launch(argv, log_path));
  std::unique_ptr<GlobalEvaluator> e(new GlobalEvaluator(launcher, clock, pid, dir, log_path));
  const absl::Time until = clock->Now() + startup_timeout;
  while (!std::filesystem::exists(e->files_.ready())) {
    SEXTANT_RETURN_IF_ERROR(e->CheckAlive());
    if (clock->Now() > until) {
      return absl::DeadlineExceededError(absl::StrCat("the evaluator did not start within ",
                                                      absl::FormatDuration(startup_timeout),
                                                      "; see ", log_path));
    }
    clock->SleepFor(absl::Milliseconds(10));
  }
  SEXTANT_ASSIGN_OR_RETURN(e->layout_, ReadSafetensors(e->files_.initial()));
  SEXTANT_ASSIGN_OR_RETURN(e->initial_, FlattenToF32(e->layout_));
  for (Tensor& t : e->layout_.tensors) std::string().swap(t.data);
  return e;
}

GlobalEvaluator::~GlobalEvaluator() {
  if (exited_) return;
  launcher_->Signal(pid_, SIGKILL);
  for (int i = 0; i < 200 && !launcher_->Poll(pid_); ++i) {
    clock_->SleepFor(absl::Milliseconds(5));
  }
}

absl::Status GlobalEvaluator::CheckAlive() {
  if (!exited_) {
    if (std::optional<int> status = launcher_->Poll(pid_)) {
      exited_ = true;
      return absl::UnavailableError(
          absl::StrCat("the evaluator exited (status ", *status, "); see ", log_path_));
    }
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat("the evaluator exited; see ", log_path_));
}

absl::StatusOr<ModelScore> GlobalEvaluator::Evaluate(int64_t round, absl::Span<const float> weights,
                                                     absl::Duration timeout) {
  if (weights.size() != initial_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a model of ", weights.size(), " values; the evaluator's has ", initial_.size()));
  }
  const std::string score_path = files_.score(round);
  std::filesystem::remove(score_path);
  SEXTANT_RETURN_IF_ERROR(WriteFloatsAtomically(files_.request(round), weights));
  const absl::Time until = clock_->Now() + timeout;
  while (true) {
    absl::StatusOr<ModelScore> score = ReadScore(score_path);
    if (score.ok() || !absl::IsNotFound(score.status())) {
      std::filesystem::remove(score_path);
      return score;
    }
    SEXTANT_RETURN_IF_ERROR(CheckAlive());
    if (clock_->Now() > until) {
      return absl::DeadlineExceededError(absl::StrCat("the evaluator did not score round ", round,
                                                      " within ", absl::FormatDuration(timeout),
                                                      "; see ", log_path_));
    }
    clock_->SleepFor(kPoll);
  }
}

}  // namespace sextant
