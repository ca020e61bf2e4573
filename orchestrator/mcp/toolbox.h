#ifndef SEXTANT_ORCHESTRATOR_MCP_TOOLBOX_H_
#define SEXTANT_ORCHESTRATOR_MCP_TOOLBOX_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sextant {

// What a tool call returns: MCP's CallToolResult, less its framing.
struct ToolResult {
  nlohmann::json structured;  // structuredContent: an object, or null for none
  std::string text;           // the text content; empty: the structured content as JSON
  bool is_error = false;      // isError: the tool failed (text says why)

  static ToolResult Ok(nlohmann::json structured, std::string text = "") {
    return ToolResult{std::move(structured), std::move(text), false};
  }
  // A failed call: the status's message as its text, and {"error": {"code", "message"}}.
  static ToolResult Error(const absl::Status& status);
};

// One resource's contents (text only).
struct ResourceContents {
  std::string uri;
  std::string mime_type;
  std::string text;
};

// What an MCP server serves: its tools and resources. McpServer (mcp_server.h) speaks the
// protocol and calls these. Not thread-safe; the server calls it from one thread.
class Toolbox {
 public:
  virtual ~Toolbox() = default;

  // The tools, each an MCP Tool object: {"name", "title", "description", "inputSchema"}.
  virtual nlohmann::json ListTools() = 0;

  // Runs the tool `name` (one that ListTools names) with its arguments (an object). Every
  // failure of the tool, bad arguments included, is a ToolResult with is_error; it never throws.
  virtual ToolResult CallTool(const std::string& name, const nlohmann::json& arguments) = 0;

  // The resources there are now, each an MCP Resource object: {"uri", "name", "mimeType", ...}.
  virtual nlohmann::json ListResources() = 0;

  // The resource templates, each {"uriTemplate", "name", "mimeType", "description"}.
  virtual nlohmann::json ListResourceTemplates() = 0;

  // The contents of the resource at uri. InvalidArgument for a URI of the wrong form or one that
  // names a path outside the root; NotFound when it names no resource.
  virtual absl::StatusOr<ResourceContents> ReadResource(const std::string& uri) = 0;
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_MCP_TOOLBOX_H_
