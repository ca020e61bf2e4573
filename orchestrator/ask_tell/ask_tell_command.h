// `sextant ask` and `sextant tell`: ask a run for trials and tell it their results, against a
// live run (the address in RUN_DIR/address) or offline on a run directory no process holds.
#ifndef SEXTANT_ORCHESTRATOR_ASK_TELL_ASK_TELL_COMMAND_H_
#define SEXTANT_ORCHESTRATOR_ASK_TELL_ASK_TELL_COMMAND_H_

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace sextant {

struct AskOptions {
  std::string run_dir;
  int count = 1;            // --n; default 1, at most 1024
  double wait_seconds = 0;  // --wait (live only): long-poll this long when none can start
};

struct TellOptions {
  std::string run_dir;
  int64_t trial = 0;
  int attempt = 0;                        // --attempt; default 0: the one that holds it now
  std::optional<double> value;            // --value: the one objective
  std::vector<double> values;             // --values: one per objective, in order
  std::string state;                      // --state: "", "pruned" or "failed"
  std::map<std::string, double> metrics;  // --metrics k=v,...
  std::optional<double> step;             // --step: an intermediate report, not a tell
  std::string error;                      // --error: why it failed
};

// "k=v,k2=v2" as a map. InvalidArgument naming the bad entry (no '=', an empty name, a value
// that is not a number; "nan" and "inf" parse and are refused later, naming the trial).
absl::StatusOr<std::map<std::string, double>> ParseMetricList(const std::string& text);
// "v1,v2" as numbers. InvalidArgument naming the bad entry.
absl::StatusOr<std::vector<double>> ParseValueList(const std::string& text);

// Prints each asked trial as one JSON line:
//   {"trial", "attempt", "params", "checkpoint_dir", "fidelity_target", "fidelity_key",
//    "resume", "lease_seconds", "run_id"}
// Fewer lines than asked when no more can start now; none, with a note on err, when the run
// has ended. Returns 0, 2 on invalid input (not a run directory, not an ask/tell run, a bad
// count), 1 on other failures.
int RunAskCommand(const AskOptions& options, std::ostream& out, std::ostream& err,
                  Clock* clock = RealClockInstance());

// Tells a trial's result and prints one JSON line {"trial", "attempt", "state",
// "already_told", "values"}; metrics alone (no value, values, state or step) tell it completed
// when they name every objective (InvalidArgument naming a missing one otherwise); with step,
// reports an intermediate measurement instead (the fidelity key, or "step" without a scheduler, set
// to it) and prints continue, stop, pause or notice. Returns 0, 2 on invalid input (an unknown
// trial, one that no longer holds its lease, a value that is not a finite number, a count that does
// not match the objectives), 1 on other failures.
int RunTellCommand(const TellOptions& options, std::ostream& out, std::ostream& err,
                   Clock* clock = RealClockInstance());

// `sextant tell`'s command line as given: each field is the flag's text, empty when absent.
// RunTellCommandLine parses the numbers itself, so that a bad one is named with the trial.
struct TellFlags {
  std::string run_dir, trial;
  std::string attempt, value, values, state, metrics, step, error;
};

// Parses flags into TellOptions and runs RunTellCommand. A bad number, a bad --metrics entry or
// a missing or extra choice of --value/--values/--state/--step is exit 2 with the reason.
int RunTellCommandLine(const TellFlags& flags, std::ostream& out, std::ostream& err,
                       Clock* clock = RealClockInstance());

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_ASK_TELL_ASK_TELL_COMMAND_H_
