#include "common/command_metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace sextant {
namespace {

class LastValues : public CommandObserver {
 public:
  explicit LastValues(std::map<std::string, double>* last) : last_(last) {}
  void OnMetrics(const std::map<std::string, double>& metrics, double) override {
    for (const auto& [name, value] : metrics) (*last_)[name] = value;
  }

 private:
  std::map<std::string, double>* last_;
};

}  // namespace

absl::StatusOr<MetricsCommandResult> RunCommandForMetrics(const CommandSpec& spec, Clock* clock) {
  MetricsCommandResult out;
  LastValues observer(&out.last);
  absl::StatusOr<CommandResult> r = RunCommand(spec, &observer, clock);
  if (!r.ok()) return r.status();
  out.command = *std::move(r);
  return out;
}

absl::Status CommandExitStatus(const CommandResult& result, absl::string_view what) {
  if (!result.spawn_failed && !result.timed_out && result.exit_code == 0) {
    return absl::OkStatus();
  }
  const std::string why =
      result.error.empty() ? absl::StrCat("exited with status ", result.exit_code) : result.error;
  return absl::FailedPreconditionError(absl::StrCat(
      what, " ", why, "; stderr: ", absl::StripTrailingAsciiWhitespace(result.stderr_tail)));
}

std::optional<PrintedEvaluation> EvaluationFrom(const std::map<std::string, double>& last,
                                                double default_examples) {
  auto loss = last.find("eval_loss");
  auto accuracy = last.find("eval_accuracy");
  if (loss == last.end() || accuracy == last.end() || !std::isfinite(loss->second) ||
      !std::isfinite(accuracy->second)) {
    return std::nullopt;
  }
  auto examples = last.find("eval_examples");
  const double n = examples != last.end() ? examples->second : default_examples;
  return PrintedEvaluation{loss->second, accuracy->second,
                           std::isfinite(n) ? static_cast<int64_t>(std::max(0.0, n)) : 0};
}

}  // namespace sextant
