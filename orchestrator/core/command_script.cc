#include "orchestrator/core/command_script.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

bool HasScriptExtension(const std::string& arg) {
  for (const char* ext : {".py", ".sh", ".bash", ".R", ".jl", ".pl", ".rb", ".js", ".lua"}) {
    if (absl::EndsWith(arg, ext) && arg.size() > std::char_traits<char>::length(ext)) return true;
  }
  return false;
}

// An option, an assignment or a reference to a parameter or a variable is not a file the
// command needs before it starts.
bool MayBeAFile(const std::string& arg) {
  return !arg.empty() && arg[0] != '-' && !absl::StrContains(arg, '=') &&
         !absl::StrContains(arg, '$') && !absl::StrContains(arg, ' ');
}

std::string Resolve(const std::string& path, const std::string& working_dir) {
  if (path[0] == '/' || working_dir.empty()) return path;
  return (std::filesystem::path(working_dir) / path).string();
}

bool Exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

}  // namespace

std::optional<std::string> CommandScript(const std::vector<std::string>& argv,
                                         const std::string& working_dir) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (i > 0 && (arg == "-c" || arg == "-m" || arg == "-e")) return std::nullopt;
    if (!MayBeAFile(arg)) continue;
    const bool has_slash = absl::StrContains(arg, '/');
    if (i == 0) {
      // A program by name is looked up on PATH, not in the working directory; an interpreter
      // named by its path (/usr/bin/python3, .venv/bin/python) runs the script that follows.
      if (!has_slash) continue;
      const bool interpreter = arg[0] == '/' || absl::StrContains(arg, "/bin/");
      if (interpreter && !HasScriptExtension(arg) && Exists(Resolve(arg, working_dir))) continue;
      return arg;
    }
    if (has_slash || HasScriptExtension(arg)) return arg;
  }
  return std::nullopt;
}

std::vector<std::string> MissingCommandScriptWarnings(const v1::ExperimentSpec& spec) {
  std::vector<std::string> out;
  if (spec.search().mode() == v1::Search::ASK_TELL) return out;
  if (spec.resources().provider() == "simulated") return out;
  const v1::TrialSpec& trial = spec.trial();
  const std::vector<std::string> argv(trial.command().begin(), trial.command().end());
  std::optional<std::string> script = CommandScript(argv, trial.working_dir());
  if (script && !Exists(Resolve(*script, trial.working_dir()))) {
    out.push_back(absl::StrCat(
        "trial.command: ", *script, " does not exist in ", trial.working_dir(),
        " (the trial's working directory: trial.working_dir, else the experiment file's folder); "
        "every trial would fail. Copy the script there or fix the path"));
  }
  // A federated run's own commands run in the experiment file's folder.
  const std::string folder = std::filesystem::path(spec.source_path()).parent_path().string();
  for (const auto& [key, command] :
       {std::pair{"federation.client_command", &spec.federation().client_command()},
        std::pair{"federation.evaluate_command", &spec.federation().evaluate_command()}}) {
    script = CommandScript(std::vector<std::string>(command->begin(), command->end()), folder);
    if (script && !Exists(Resolve(*script, folder))) {
      out.push_back(absl::StrCat(key, ": ", *script, " does not exist in ",
                                 folder.empty() ? "." : folder,
                                 " (the experiment file's folder, where it runs); every round "
                                 "would fail. Copy the script there or fix the path"));
    }
  }
  return out;
}

}  // namespace sextant
