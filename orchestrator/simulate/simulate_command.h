#ifndef SEXTANT_ORCHESTRATOR_SIMULATE_SIMULATE_COMMAND_H_
#define SEXTANT_ORCHESTRATOR_SIMULATE_SIMULATE_COMMAND_H_

#include <map>
#include <ostream>
#include <string>

namespace sextant {

struct SimulateOptions {
  std::string run_dir;  // a search's run directory; default runs/<name>-sim
  // A plain federated run's what-ifs: region -> "spot" | "on_demand" for every pool of that
  // region, and the region of the global tier. Default none.
  std::map<std::string, std::string> markets;
  std::string global_region;
  double time_scale = 1;  // spot interruption times, as `sextant run --time-scale`
  // A plain federated run's forecast timed by a run of its own (a pilot, an on-demand twin):
  // its run directory, whose measured start-up and rounds (MeasureRunTiming) replace the
  // simulate: block's guesses. Default none.
  std::string calibrate_run_dir;
  // The evaluator that reports the built-in model's size (a federated forecast). Required for
  // one.
  std::string worker_binary;
};

// `sextant simulate FILE [--run-dir DIR]`: loads and validates the experiment and its
// catalog. A search is simulated on virtual time, its run directory written (default
// runs/<name>-sim), and the cost, the virtual wall time, the preemptions and the best value
// printed. A plain federated run is forecast instead (ForecastFederatedRun): each round's
// compute and transfer dollars and the wall time, printed, nothing stored (timed by
// options.calibrate_run_dir's run when given). Returns the exit
// code: 0 when the simulation ran (whatever its end state), 2 on invalid input or a run
// directory that already holds a run, 1 on other failures.
int RunSimulateCommand(const std::string& file, const SimulateOptions& options, std::ostream& out,
                       std::ostream& err);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SIMULATE_SIMULATE_COMMAND_H_
