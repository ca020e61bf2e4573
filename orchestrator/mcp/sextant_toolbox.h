#ifndef SEXTANT_ORCHESTRATOR_MCP_SEXTANT_TOOLBOX_H_
#define SEXTANT_ORCHESTRATOR_MCP_SEXTANT_TOOLBOX_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/mcp/toolbox.h"

namespace sextant {

struct SextantToolboxOptions {
  // The directory the tools act under (required; it must exist). Every path a client names is
  // resolved under it (RootPaths): nothing outside it is read, written, started or stopped.
  std::string root;
  // The `sextant` binary that start_run starts as `sextant run FILE --run-dir DIR` (required).
  std::string sextant_binary;
  // How start_run starts that process and stop_run signals a run (required; not owned).
  ProcessLauncher* launcher = nullptr;
  // Dates reports and paces waits (default: the real clock).
  Clock* clock = nullptr;
};

// Sextant's verbs as MCP tools, and its run directories as resources:
//   validate_experiment, start_run, run_status, results, ask, tell, report, simulate,
//   list_runs, stop_run;
//   sextant://runs/NAME/results.json (the results document of `sextant results --format json`)
//   and sextant://runs/NAME/report.html (the page of `sextant report`), NAME being the run
//   directory's path under the root (percent-encoded).
// Each tool calls the library function its CLI verb calls. Runs that start_run starts are
// separate processes in process groups of their own; they outlive the server.
// Not thread-safe; one McpServer calls it. InvalidArgument when the root is not a directory or a
// required option is missing.
absl::StatusOr<std::unique_ptr<Toolbox>> NewSextantToolbox(const SextantToolboxOptions& options);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_MCP_SEXTANT_TOOLBOX_H_
