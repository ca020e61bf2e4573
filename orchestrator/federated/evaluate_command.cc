#include "orchestrator/federated/evaluate_command.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace sextant {
namespace {

// The last non-blank line of the file at path (at most 200 bytes of it), or "" when none.
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!absl::StripAsciiWhitespace(line).empty()) last = line;
  }
  return last.size() > 200 ? absl::StrCat(last.substr(0, 200), "...") : last;
}

}  // namespace

absl::StatusOr<PrintedEvaluation> RunEvaluateCommand(const EvaluateCommandOptions& options,
                                                     int64_t round, const std::string& model_path,
                                                     Clock* clock) {
  if (options.argv.empty() || options.output_dir.empty()) {
    return absl::InvalidArgumentError("evaluate_command needs argv and output_dir");
  }
  const std::string what =
      absl::StrCat("evaluate_command [", absl::StrJoin(options.argv, " "), "]");
  std::error_code ec;
  std::filesystem::create_directories(options.output_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(options.output_dir, ": ", ec.message()));
  CommandSpec spec;
  spec.argv = options.argv;
  spec.env = {{"SEXTANT_GLOBAL_MODEL", model_path}, {"SEXTANT_ROUND", absl::StrCat(round)}};
  spec.working_dir = options.working_dir;
  spec.stdout_path = absl::StrCat(options.output_dir, "/round-", round, ".out");
  spec.stderr_path = absl::StrCat(options.output_dir, "/round-", round, ".err");
  spec.timeout_seconds = options.timeout_seconds;
  SEXTANT_ASSIGN_OR_RETURN(MetricsCommandResult r, RunCommandForMetrics(spec, clock));
  SEXTANT_RETURN_IF_ERROR(CommandExitStatus(r.command, what));
  std::optional<PrintedEvaluation> e = EvaluationFrom(r.last, 1);
  if (!e) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     " printed no eval_loss=X eval_accuracy=Y line with finite values (its "
                     "last line: '",
                     LastLine(spec.stdout_path), "')"));
  }
  return *e;
}

}  // namespace sextant
