#include "orchestrator/federated/global_score.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "orchestrator/federated/evaluate_command.h"

namespace sextant {
namespace {

// How long the evaluator may take to build the model and load the validation split, and to
// score one model.
constexpr absl::Duration kEvaluatorStartup = absl::Seconds(120);
constexpr absl::Duration kEvaluationTimeout = absl::Seconds(600);

}  // namespace

double GlobalScore::EventTime() const { return absl::ToUnixMicros(env_.clock->Now()) / 1e6; }

absl::Status GlobalScore::StartEvaluator() {
  std::filesystem::create_directories(env_.logs_dir);
  SEXTANT_ASSIGN_OR_RETURN(
      evaluator_, GlobalEvaluator::Start(env_.launcher,
                                         {env_.worker_binary, "--role", "evaluator", "--spec",
                                          env_.spec_file, "--work-dir", env_.fed_dir + "/eval",
                                          "--threads", "2", "--exit-with-parent"},
                                         env_.fed_dir + "/eval", env_.logs_dir + "/evaluator.log",
                                         kEvaluatorStartup, env_.clock));
  return absl::OkStatus();
}

absl::Status GlobalScore::Evaluate(int64_t round, absl::Span<const float> model) {
  if (!evaluator_) return absl::OkStatus();
  SEXTANT_ASSIGN_OR_RETURN(last_, evaluator_->Evaluate(round, model, kEvaluationTimeout));
  return absl::OkStatus();
}

absl::Status GlobalScore::AfterRound(int64_t round, const SenderMetrics& metrics,
                                     GlobalModel& model) {
  const bool eval =
      round == fed_.rounds() || fed_.eval_every() <= 1 || round % fed_.eval_every() == 0;
  if (evaluator_) return eval ? Evaluate(round, model.values()) : absl::OkStatus();
  last_ = ModelScore{metrics.eval_loss, metrics.eval_accuracy,
                     static_cast<int64_t>(metrics.eval_weight)};
  if (eval && !fed_.evaluate_command().empty()) RunEvaluateCommandOn(round, model);
  return absl::OkStatus();
}

void GlobalScore::Restore(const ModelScore& clients) {
  if (!evaluator_) last_ = clients;
}

void GlobalScore::EvaluateAgainIfNone(int64_t round, absl::Span<const float> model) {
  if (round >= 1 && last_.examples == 0) (void)Evaluate(round, model);
}

// federation.evaluate_command on the global model after `round`: its score becomes last_. A
// command that fails or prints no score is reported (event evaluate_failed and a line on
// stderr) and last_ is left as it was: the clients' weighted evaluation.
void GlobalScore::RunEvaluateCommandOn(int64_t round, GlobalModel& model) {
  const std::string dir = env_.fed_dir + "/evaluate";
  const std::string file = dir + "/global.safetensors";
  EvaluateCommandOptions o;
  o.argv.assign(fed_.evaluate_command().begin(), fed_.evaluate_command().end());
  o.working_dir = env_.source_dir;
  o.output_dir = dir;
  o.timeout_seconds = absl::ToDoubleSeconds(kEvaluationTimeout);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const absl::Status written = model.WriteSafetensors(file);
  absl::StatusOr<PrintedEvaluation> e = written.ok()
                                            ? RunEvaluateCommand(o, round, file, env_.clock)
                                            : absl::StatusOr<PrintedEvaluation>(written);
  if (e.ok()) {
    last_ = ModelScore{e->loss, e->accuracy, std::max<int64_t>(e->examples, 1)};
    return;
  }
  const std::string line =
      absl::StrCat("round ", round, ": ", e.status().message(), " (output in ", dir, "/round-",
                   round, ".out); the round's metrics are the clients' own");
  (void)env_.store->AddEvent(EventTime(), "evaluate_failed", 0, line);
  *env_.err << "sextant: " << line << "\n" << std::flush;
}

}  // namespace sextant
