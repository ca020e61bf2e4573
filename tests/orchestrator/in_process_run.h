#ifndef SEXTANT_TESTS_ORCHESTRATOR_IN_PROCESS_RUN_H_
#define SEXTANT_TESTS_ORCHESTRATOR_IN_PROCESS_RUN_H_

#include <chrono>
#include <functional>
#include <memory>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/core/store.h"
#include "orchestrator/session/run_session.h"
#include "tests/fakes/scaled_clock.h"

namespace sextant::testing {

// How a run in the test's process ended.
struct InProcessRun {
  absl::Status status;  // the loop's
  v1::RunState state = v1::RUN_STATE_UNSPECIFIED;
  double real_seconds = 0;
  absl::Duration clock_elapsed;  // on the run's clock
  std::string out, err;
};

// Opens options.experiment_file as a new run (RunSession::Open) and runs `loop` (RunSearch or
// RunFederated) on it here, on the real clock run `scale` times fast; its workers and
// participants are real processes (options.worker_binary, default the build's).
inline InProcessRun RunInProcess(RunOptions options, double scale,
                                 const std::function<absl::Status(RunSession&)>& loop) {
  if (options.worker_binary.empty()) {
    options.worker_binary = std::string(SEXTANT_BIN_DIR) + "/sextant-worker";
  }
  ScaledClock clock(scale);
  std::unique_ptr<ProcessLauncher> launcher = NewPosixProcessLauncher();
  std::ostringstream out, err;
  InProcessRun r;
  const absl::Time clock_start = clock.Now();
  const auto real_start = std::chrono::steady_clock::now();
  {
    absl::StatusOr<std::unique_ptr<RunSession>> session =
        RunSession::Open(options, RunEnv{&clock, launcher.get(), &out, &err});
    if (!session.ok()) {
      r.status = session.status();
      return r;
    }
    r.status = loop(**session);
    absl::StatusOr<v1::RunState> state = (*session)->store().GetRunState();
    if (state.ok()) r.state = *state;
  }
  r.real_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - real_start).count();
  r.clock_elapsed = clock.Now() - clock_start;
  r.out = out.str();
  r.err = err.str();
  return r;
}

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_ORCHESTRATOR_IN_PROCESS_RUN_H_
