#ifndef SEXTANT_ORCHESTRATOR_SIMULATE_SIMULATE_COMMAND_H_
#define SEXTANT_ORCHESTRATOR_SIMULATE_SIMULATE_COMMAND_H_

#include <ostream>
#include <string>

namespace sextant {

// `sextant simulate FILE [--run-dir DIR]`: loads and validates the experiment, loads its
// catalog, simulates it and writes the run directory (default runs/<name>-sim), then prints
// the cost, the virtual wall time, the preemptions and the best value. Returns the exit code:
// 0 when the simulation ran (whatever its end state), 2 on invalid input or a run directory
// that already holds a run, 1 on other failures.
int RunSimulateCommand(const std::string& file, const std::string& run_dir, std::ostream& out,
                       std::ostream& err);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SIMULATE_SIMULATE_COMMAND_H_
