#ifndef SEXTANT_ORCHESTRATOR_SEARCH_SEARCH_RUN_H_
#define SEXTANT_ORCHESTRATOR_SEARCH_SEARCH_RUN_H_

#include "absl/status/status.h"
#include "orchestrator/session/run_session.h"

namespace sextant {

// The search loop: runs (or resumes) the session's search experiment to its end with local
// workers, the instances of its pools, or ask/tell clients. OK when it ends normally;
// Cancelled when interrupted by SIGINT/SIGTERM (then running trials are CANCELLED and it can
// be resumed); otherwise the error (InvalidArgument for bad input). When budget.max_cost or
// budget.max_wall_time is reached, running trials get the preemption-style notice (they write
// their checkpoint and stop; those still running after the wind-down are cancelled) and the
// run ends BUDGET_EXHAUSTED, OK; a resume with a raised budget continues them from their
// checkpoints.
absl::Status RunSearch(RunSession& session);

// `sextant run` and `sextant resume`: opens the session and runs its search or federated loop.
// Returns the exit code of the contract (ExitCode in run_session.h), having printed any error.
int RunExperiment(const RunOptions& options, const RunEnv& env);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_SEARCH_SEARCH_RUN_H_
