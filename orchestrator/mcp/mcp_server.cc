#include "orchestrator/mcp/mcp_server.h"

#include <algorithm>
#include <exception>
#include <set>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

using nlohmann::json;

// JSON-RPC 2.0's error codes, and MCP's for a resource that is not there.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kResourceNotFound = -32002;

constexpr size_t kMaxMethodBytes = 256;
constexpr size_t kMaxUriBytes = 8192;

// Versions a client may ask for that this server answers in kind; any other gets
// kMcpProtocolVersion, and the client decides whether it can speak that.
const std::set<std::string>& AnsweredVersions() {
  static const auto* versions =
      new std::set<std::string>{kMcpProtocolVersion, "2025-03-26", "2024-11-05"};
  return *versions;
}

// Text from files and processes may hold bytes that are not UTF-8: they are replaced, never
// thrown over.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string ErrorLine(const json& id, int code, const std::string& message) {
  return Dump(
      json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}});
}

// The deepest nesting of arrays and objects in text, counted before parsing so that a message
// of a million '[' is refused without building it.
int NestingDepth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

bool ValidId(const json& id) { return id.is_string() || id.is_number_integer(); }

}  // namespace

ToolResult ToolResult::Error(const absl::Status& status) {
  return ToolResult{
      json{{"error",
            {{"code", absl::StatusCodeToString(status.code())}, {"message", status.message()}}}},
      std::string(status.message()), true};
}

McpServer::McpServer(Toolbox* toolbox, McpServerOptions options)
    : toolbox_(toolbox), options_(std::move(options)) {}

std::optional<std::string> McpServer::HandleMessage(std::string_view message) {
  if (message.size() > options_.max_message_bytes) {
    return ErrorLine(nullptr, kInvalidRequest,
                     absl::StrCat("message of ", message.size(), " bytes is over the limit of ",
                                  options_.max_message_bytes));
  }
  if (NestingDepth(message, options_.max_depth) > options_.max_depth) {
    return ErrorLine(nullptr, kInvalidRequest,
                     absl::StrCat("message nests deeper than ", options_.max_depth, " levels"));
  }
  json m = json::parse(message, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded()) return ErrorLine(nullptr, kParseError, "parse error: not valid JSON");
  if (m.is_array()) {
    return ErrorLine(nullptr, kInvalidRequest,
                     "batches are not part of MCP 2025-06-18: send one message per line");
  }
  if (!m.is_object() || m.value("jsonrpc", json()) != "2.0") {
    return ErrorLine(nullptr, kInvalidRequest, "not a JSON-RPC 2.0 message (\"jsonrpc\": \"2.0\")");
  }
  const bool has_id = m.contains("id");
  if (has_id && !ValidId(m["id"])) {
    return ErrorLine(nullptr, kInvalidRequest, "id must be a string or an integer");
  }
  const json id = has_id ? m["id"] : json();
  if (!m.contains("method")) {
    // A response to a request of ours: this server sends none, so there is nothing to match.
    if (has_id && (m.contains("result") || m.contains("error"))) return std::nullopt;
    return ErrorLine(id, kInvalidRequest, "a request needs a method");
  }
  if (!m["method"].is_string() ||
      m["method"].get_ref<const std::string&>().size() > kMaxMethodBytes) {
    return ErrorLine(id, kInvalidRequest, "method must be a string of at most 256 bytes");
  }
  const std::string& method = m["method"].get_ref<const std::string&>();
  if (!has_id) {
    // Notifications get no reply: initialized, cancelled (calls are answered in order, so there
    // is never one in flight to cancel) and any other.
    return std::nullopt;
  }
  const json params = m.contains("params") ? m["params"] : json::object();
  if (!params.is_object()) return ErrorLine(id, kInvalidParams, "params must be an object");
  Outcome outcome;
  try {
    outcome = Dispatch(method, params);
  } catch (const std::exception& e) {
    // A bug, not the client's fault: it is answered, and the server goes on.
    if (options_.log) *options_.log << "sextant mcp: " << method << ": " << e.what() << "\n";
    outcome = Outcome::Error(kInternalError, absl::StrCat("internal error: ", e.what()));
  }
  if (outcome.code != 0) return ErrorLine(id, outcome.code, outcome.message);
  return Dump(json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(outcome.result)}});
}

McpServer::Outcome McpServer::Dispatch(const std::string& method, const json& params) {
  if (method == "initialize") {
    const json asked = params.value("protocolVersion", json());
    if (!asked.is_string())
      return Outcome::Error(kInvalidParams, "initialize needs a protocolVersion");
    const std::string version = AnsweredVersions().count(asked.get<std::string>())
                                    ? asked.get<std::string>()
                                    : kMcpProtocolVersion;
    initialized_ = true;
    return Outcome::Result(
        json{{"protocolVersion", version},
             {"capabilities",
              {{"tools", {{"listChanged", false}}},
               {"resources", {{"subscribe", false}, {"listChanged", false}}}}},
             {"serverInfo", {{"name", options_.name}, {"version", options_.version}}},
             {"instructions",
              "Sextant runs hyperparameter searches and federated learning from one YAML "
              "experiment file. Validate a file, start a run, poll run_status until it is no "
              "longer RUNNING, then read its results. Paths are relative to the server's "
              "root."}});
  }
  if (method == "ping") return Outcome::Result(json::object());
  if (!initialized_) {
    return Outcome::Error(kInvalidRequest, absl::StrCat(method, ": send initialize first"));
  }
  if (method == "tools/list") return Outcome::Result({{"tools", toolbox_->ListTools()}});
  if (method == "tools/call") return CallTool(params);
  if (method == "resources/list")
    return Outcome::Result({{"resources", toolbox_->ListResources()}});
  if (method == "resources/templates/list") {
    return Outcome::Result({{"resourceTemplates", toolbox_->ListResourceTemplates()}});
  }
  if (method == "resources/read") return ReadResource(params);
  return Outcome::Error(kMethodNotFound, absl::StrCat("method not found: ", method));
}

McpServer::Outcome McpServer::CallTool(const json& params) {
  const json name = params.value("name", json());
  if (!name.is_string() || name.get_ref<const std::string&>().size() > kMaxMethodBytes) {
    return Outcome::Error(kInvalidParams, "tools/call needs a tool name (a string)");
  }
  bool known = false;
  for (const json& tool : toolbox_->ListTools()) known = known || tool["name"] == name;
  if (!known)
    return Outcome::Error(kInvalidParams, absl::StrCat("unknown tool: ", name.get<std::string>()));
  const json arguments = params.value("arguments", json::object());
  if (!arguments.is_object()) return Outcome::Error(kInvalidParams, "arguments must be an object");
  ToolResult r = toolbox_->CallTool(name.get<std::string>(), arguments);
  const std::string text = r.text.empty() && !r.structured.is_null()
                               ? r.structured.dump(2, ' ', false, json::error_handler_t::replace)
                               : r.text;
  json result{{"content", json::array({{{"type", "text"}, {"text", text}}})},
              {"isError", r.is_error}};
  if (r.structured.is_object()) result["structuredContent"] = std::move(r.structured);
  return Outcome::Result(std::move(result));
}

McpServer::Outcome McpServer::ReadResource(const json& params) {
  const json uri = params.value("uri", json());
  if (!uri.is_string() || uri.get_ref<const std::string&>().size() > kMaxUriBytes) {
    return Outcome::Error(kInvalidParams, "resources/read needs a uri (a string of at most 8 KiB)");
  }
  absl::StatusOr<ResourceContents> r = toolbox_->ReadResource(uri.get<std::string>());
  if (!r.ok()) {
    const int code =
        r.status().code() == absl::StatusCode::kNotFound ? kResourceNotFound : kInvalidParams;
    return Outcome::Error(code, std::string(r.status().message()));
  }
  return Outcome::Result(
      json{{"contents",
            json::array({{{"uri", r->uri}, {"mimeType", r->mime_type}, {"text", r->text}}})}});
}

namespace {

enum class LineRead { kLine, kTooLong, kEnd };

// One line into *line, without its newline (nor a '\r' before it). A line over max bytes is
// read to its end and dropped, so it never takes more than max bytes of memory.
LineRead ReadLine(std::istream& in, size_t max, std::string* line) {
  std::streambuf* buf = in.rdbuf();
  line->clear();
  bool any = false, too_long = false;
  while (true) {
    const int c = buf->sbumpc();
    if (c == std::char_traits<char>::eof()) break;
    any = true;
    if (c == '\n') break;
    if (too_long) continue;
    if (line->size() >= max + 1) {  // +1: room for a '\r' to strip
      too_long = true;
      line->clear();
      line->shrink_to_fit();
      continue;
    }
    line->push_back(static_cast<char>(c));
  }
  if (!any) return LineRead::kEnd;
  if (!line->empty() && line->back() == '\r') line->pop_back();
  if (too_long || line->size() > max) return LineRead::kTooLong;
  return LineRead::kLine;
}

}  // namespace

absl::Status McpServer::Serve(std::istream& in, std::ostream& out) {
  std::string line;
  while (true) {
    const LineRead read = ReadLine(in, options_.max_message_bytes, &line);
    if (read == LineRead::kEnd) return absl::OkStatus();
    std::optional<std::string> reply;
    if (read == LineRead::kTooLong) {
      reply = ErrorLine(nullptr, kInvalidRequest,
                        absl::StrCat("message is over the limit of ", options_.max_message_bytes,
                                     " bytes; it was skipped"));
    } else if (line.find_first_not_of(" \t") != std::string::npos) {
      reply = HandleMessage(line);
    }
    if (!reply) continue;
    out << *reply << '\n';
    out.flush();
    if (!out) return absl::UnavailableError("cannot write to the client (stdout closed)");
  }
}

}  // namespace sextant
