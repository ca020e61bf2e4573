#ifndef SEXTANT_ORCHESTRATOR_MCP_MCP_COMMAND_H_
#define SEXTANT_ORCHESTRATOR_MCP_MCP_COMMAND_H_

#include <string>

#include "common/clock.h"

namespace sextant {

// `sextant mcp --root DIR`: serves the Model Context Protocol on stdin and stdout (one JSON-RPC
// message per line) until stdin ends, with the tools and resources of SextantToolbox over DIR.
// stdout carries only protocol messages: whatever else the process would print there goes to
// stderr, where the server logs. Runs it starts are `sextant run` processes of this executable.
// Returns the exit code: 0 when stdin ends, 2 when DIR is not a directory, 1 when stdout fails.
int RunMcpCommand(const std::string& root, Clock* clock);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_MCP_MCP_COMMAND_H_
