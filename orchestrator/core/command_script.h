#ifndef SEXTANT_ORCHESTRATOR_CORE_COMMAND_SCRIPT_H_
#define SEXTANT_ORCHESTRATOR_CORE_COMMAND_SCRIPT_H_

#include <optional>
#include <string>
#include <vector>

#include "sextant/v1/experiment.pb.h"

namespace sextant {

// The script a trial command runs: the first argument that looks like a file path, as given
// (`train.py` in [python3, train.py], `./train.sh`, `../asha/train.sh`). An argument looks like
// one when it holds a '/' or ends in a script's extension (.py .sh .bash .R .jl .pl .rb .js
// .lua), and is not an option (-x, --lr=...), an assignment (a=b) or a ${name} reference.
// The program itself (argv[0]) counts only when it holds a '/': `./train.sh` does,
// `python3` does not, and an existing interpreter named by an absolute path or one under a
// bin/ folder (`/usr/bin/python3`, `.venv/bin/python`) is passed over for the script after it. The
// search stops at an interpreter's inline-code flag (-c, -m, -e): what follows is code, not a file.
// std::nullopt when no argument looks like a script, or when every candidate is an existing
// interpreter. working_dir resolves relative paths, as the worker does when it starts the command
// there.
std::optional<std::string> CommandScript(const std::vector<std::string>& argv,
                                         const std::string& working_dir);

// Warnings for `sextant validate` and `run` when a command runs a script that is not there:
// "trial.command: train.py does not exist in DIR (the trial's working directory, ...)", and the
// same for federation.client_command and evaluate_command (they run in the experiment file's
// folder). Empty when every script exists, no command runs a script file, or no command runs
// (trial.builtin, ask_tell, or provider `simulated`, which never starts the command).
std::vector<std::string> MissingCommandScriptWarnings(const v1::ExperimentSpec& spec);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_CORE_COMMAND_SCRIPT_H_
