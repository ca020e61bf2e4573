#ifndef SEXTANT_ORCHESTRATOR_MCP_MCP_SERVER_H_
#define SEXTANT_ORCHESTRATOR_MCP_MCP_SERVER_H_

#include <cstddef>
#include <iostream>
#include <istream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "orchestrator/mcp/toolbox.h"

namespace sextant {

// The protocol version this server speaks; a client asking for another is answered with it.
inline constexpr const char* kMcpProtocolVersion = "2025-06-18";

struct McpServerOptions {
  // The largest message, in bytes without its newline; a longer one is answered with an
  // Invalid Request error and skipped without being held in memory. Default 10 MiB (an
  // experiment file of up to 4 MiB, escaped, fits).
  size_t max_message_bytes = 10 << 20;
  // The deepest nesting of arrays and objects in a message. Default 64.
  int max_depth = 64;
  // serverInfo.name and version. Default "sextant", "0.1".
  std::string name = "sextant";
  std::string version = "0.1";
  // Where the server logs (never stdout: that is the protocol's). Default std::cerr; null: none.
  std::ostream* log = &std::cerr;
};

// A Model Context Protocol server: JSON-RPC 2.0 over newline-delimited messages (the stdio
// transport), protocol 2025-06-18. It answers initialize, ping, tools/list, tools/call,
// resources/list, resources/templates/list and resources/read from a Toolbox. A malformed
// message is a JSON-RPC error (parse error, invalid request, method not found, invalid params);
// a tool that fails is a tool result with isError. Requests other than initialize and ping
// before initialize are refused. Not thread-safe; one thread serves one connection.
class McpServer {
 public:
  // toolbox must outlive the server.
  McpServer(Toolbox* toolbox, McpServerOptions options = {});

  // Handles one message (a line without its newline). Returns the reply line (no newline), or
  // nullopt when none is due (a notification, or a response from the client).
  std::optional<std::string> HandleMessage(std::string_view message);

  // Reads messages, one per line, from in until it ends, and writes each reply as one line to
  // out, flushed. Blank lines are skipped. OK when in ends; Unavailable when out fails.
  absl::Status Serve(std::istream& in, std::ostream& out);

 private:
  // One request's result, or its JSON-RPC error (code != 0).
  struct Outcome {
    nlohmann::json result;
    int code = 0;
    std::string message;
    static Outcome Result(nlohmann::json result) { return Outcome{std::move(result), 0, ""}; }
    static Outcome Error(int code, std::string message) {
      return Outcome{nullptr, code, std::move(message)};
    }
  };
  Outcome Dispatch(const std::string& method, const nlohmann::json& params);
  Outcome CallTool(const nlohmann::json& params);
  Outcome ReadResource(const nlohmann::json& params);

  Toolbox* toolbox_;
  McpServerOptions options_;
  bool initialized_ = false;  // initialize has been answered
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_MCP_MCP_SERVER_H_
