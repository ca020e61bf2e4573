#ifndef SEXTANT_COMMON_COMMAND_RUNNER_H_
#define SEXTANT_COMMON_COMMAND_RUNNER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/redactor.h"

namespace sextant {

// What to run. argv[0] is looked up on PATH when it has no '/'.
struct CommandSpec {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // set on top of the inherited environment
  std::string working_dir;                 // empty: the current directory
  // Capture files; empty: not kept. Created 0600 (as the umask allows) and never through a
  // symbolic link.
  std::string stdout_path;
  std::string stderr_path;
  Redactor redact;  // secrets masked in the capture files (not in what the observer sees); none
  double timeout_seconds = 0;       // 0: no timeout
  double tick_seconds = 0.2;        // how often Observer::OnTick runs
  double kill_grace_seconds = 2;    // SIGTERM then SIGKILL after this, when stopping
  size_t max_line_bytes = 1 << 20;  // a longer stdout line is cut here (and counted)
  size_t stderr_tail_bytes = 4096;  // how much of stderr's end CommandResult keeps
};

// Receives what the command produces, on the calling thread, while RunCommand runs.
class CommandObserver {
 public:
  virtual ~CommandObserver() = default;
  // Called once the command runs; pid is also its process group id.
  virtual void OnStarted(int pid) { (void)pid; }
  // Called for every complete stdout line that holds at least one name=value metric.
  // elapsed_seconds is measured from the start of the command.
  virtual void OnMetrics(const std::map<std::string, double>& metrics, double elapsed_seconds) = 0;
  // Called about every tick_seconds. Returning false asks the command to stop: its process
  // group gets SIGTERM, then SIGKILL after kill_grace_seconds.
  virtual bool OnTick() { return true; }
  // Called for every stdout line that is a well-formed "sextant-event: KIND message" line
  // (see ParseEventLine); such lines are not parsed for metrics.
  virtual void OnEvent(const std::string& kind, const std::string& message,
                       double elapsed_seconds) {
    (void)kind, (void)message, (void)elapsed_seconds;
  }
  // How long to wait between SIGTERM and SIGKILL when OnTick has asked to stop; a negative
  // value (the default) means CommandSpec::kill_grace_seconds. A preemption notice uses this to
  // give the command the notice period to checkpoint.
  virtual double StopGraceSeconds() const { return -1; }
};

struct CommandResult {
  int exit_code = 0;           // the exit status; -N when killed by signal N
  bool timed_out = false;      // killed because timeout_seconds passed
  bool stopped = false;        // killed because OnTick returned false
  bool spawn_failed = false;   // it never started (e.g. command not found); see error
  std::string error;           // a one-line reason when it did not exit 0
  std::string stderr_tail;     // the last stderr_tail_bytes of stderr
  int64_t long_lines = 0;      // stdout lines cut at max_line_bytes
  int64_t ignored_tokens = 0;  // name=value tokens that did not parse
};

// Runs the command in a new process group, streaming its stdout through ParseMetricLine to the
// observer, copying stdout and stderr to the capture files, and killing the whole group on
// timeout or stop. Time is read from clock, so a FakeClock can drive the timeout.
// Returns the result for any outcome of the command itself (including spawn failure); returns
// an error Status only when the capture files cannot be opened (InvalidArgument naming one that
// is a symbolic link).
absl::StatusOr<CommandResult> RunCommand(const CommandSpec& spec, CommandObserver* observer,
                                         Clock* clock);

}  // namespace sextant

#endif  // SEXTANT_COMMON_COMMAND_RUNNER_H_
