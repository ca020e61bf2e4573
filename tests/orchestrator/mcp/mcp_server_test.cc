// The MCP server's protocol layer over a fake toolbox (framing, JSON-RPC errors, limits), the
// root confinement of paths, and the Sextant toolbox's process launching through a fake launcher.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/mcp/mcp_server.h"
#include "orchestrator/mcp/root_paths.h"
#include "orchestrator/mcp/sextant_toolbox.h"
#include "tests/fakes/fake_launcher.h"
#include "tests/orchestrator/test_util.h"

namespace sextant {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

// One tool, "echo", that returns its arguments, or fails when they hold "fail".
class FakeToolbox : public Toolbox {
 public:
  json ListTools() override {
    return json::array(
        {{{"name", "echo"}, {"description", "echo"}, {"inputSchema", {{"type", "object"}}}}});
  }
  ToolResult CallTool(const std::string& name, const json& arguments) override {
    calls.push_back(name);
    if (arguments.contains("fail")) return ToolResult::Error(absl::NotFoundError("no such thing"));
    return ToolResult::Ok(arguments);
  }
  json ListResources() override { return json::array(); }
  json ListResourceTemplates() override { return json::array(); }
  absl::StatusOr<ResourceContents> ReadResource(const std::string& uri) override {
    if (uri == "fake://here") return ResourceContents{uri, "text/plain", "hello"};
    return absl::NotFoundError("no resource " + uri);
  }
  std::vector<std::string> calls;
};

json Request(int id, const std::string& method, json params = json::object()) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}};
}

class McpServerTest : public ::testing::Test {
 protected:
  // The reply to one message, parsed; null when there is none.
  json Send(const std::string& message) {
    std::optional<std::string> reply = server_.HandleMessage(message);
    if (!reply) return nullptr;
    EXPECT_EQ(reply->find('\n'), std::string::npos) << "a reply is one line";
    return json::parse(*reply);
  }
  json Send(const json& message) { return Send(message.dump()); }
  void Initialize() {
    json r = Send(Request(0, "initialize", {{"protocolVersion", "2025-06-18"}}));
    ASSERT_TRUE(r.contains("result")) << r;
  }

  FakeToolbox toolbox_;
  McpServerOptions options_{.max_message_bytes = 1000, .max_depth = 8, .log = nullptr};
  McpServer server_{&toolbox_, options_};
};

TEST_F(McpServerTest, AnswersANewerClientWithItsOwnVersionAndAnOlderOneInKind) {
  json r = Send(Request(1, "initialize",
                        {{"protocolVersion", "2025-11-25"},
                         {"capabilities", json::object()},
                         {"clientInfo", {{"name", "t"}, {"version", "1"}}}}));
  EXPECT_EQ(r["id"], 1);
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "sextant");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  EXPECT_TRUE(r["result"]["capabilities"].contains("resources"));
  r = Send(Request(2, "initialize", {{"protocolVersion", "2024-11-05"}}));
  EXPECT_EQ(r["result"]["protocolVersion"], "2024-11-05");
}

TEST_F(McpServerTest, RefusesRequestsBeforeInitializeButAnswersPing) {
  EXPECT_EQ(Send(Request(1, "ping"))["result"], json::object());
  json r = Send(Request(2, "tools/list"));
  EXPECT_EQ(r["error"]["code"], -32600);
  EXPECT_THAT(r["error"]["message"].get<std::string>(), HasSubstr("initialize first"));
}

TEST_F(McpServerTest, NotificationsAndResponsesGetNoReply) {
  EXPECT_TRUE(Send(json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}}).is_null());
  EXPECT_TRUE(Send(json{{"jsonrpc", "2.0"},
                        {"method", "notifications/cancelled"},
                        {"params", {{"requestId", 3}}}})
                  .is_null());
  EXPECT_TRUE(Send(json{{"jsonrpc", "2.0"}, {"id", 9}, {"result", json::object()}}).is_null());
}

TEST_F(McpServerTest, BadJsonIsAParseErrorWithANullId) {
  json r = Send(std::string("{\"jsonrpc\": \"2.0\", \"id\": 1, "));
  EXPECT_EQ(r["error"]["code"], -32700);
  EXPECT_TRUE(r["id"].is_null());
  EXPECT_EQ(Send(std::string("\xff\xfe"))["error"]["code"], -32700);
}

TEST_F(McpServerTest, MalformedRequestsAreInvalidRequests) {
  EXPECT_EQ(Send(json::array({Request(1, "ping")}))["error"]["code"], -32600);    // a batch
  EXPECT_EQ(Send(json{{"id", 1}, {"method", "ping"}})["error"]["code"], -32600);  // no jsonrpc
  EXPECT_EQ(Send(json{{"jsonrpc", "2.0"}, {"id", 1.5}, {"method", "ping"}})["error"]["code"],
            -32600);
  EXPECT_EQ(Send(json{{"jsonrpc", "2.0"}, {"id", 1}, {"method", 7}})["error"]["code"], -32600);
  json r = Send(json{{"jsonrpc", "2.0"}, {"id", "a"}, {"method", "ping"}, {"params", 3}});
  EXPECT_EQ(r["error"]["code"], -32602);
  EXPECT_EQ(r["id"], "a");
}

TEST_F(McpServerTest, UnknownMethodIsMethodNotFoundWithTheIdEchoed) {
  Initialize();
  json r = Send(Request(42, "prompts/list"));
  EXPECT_EQ(r["id"], 42);
  EXPECT_EQ(r["error"]["code"], -32601);
}

TEST_F(McpServerTest, OversizeAndDeeplyNestedMessagesAreRefusedBeforeParsing) {
  json r = Send(std::string(1001, ' '));
  EXPECT_EQ(r["error"]["code"], -32600);
  EXPECT_THAT(r["error"]["message"].get<std::string>(), HasSubstr("limit of 1000"));
  r = Send(std::string(9, '[') + std::string(9, ']'));
  EXPECT_EQ(r["error"]["code"], -32600);
  EXPECT_THAT(r["error"]["message"].get<std::string>(), HasSubstr("deeper than 8"));
  // Brackets inside strings are text, not nesting.
  Initialize();
  r = Send(Request(1, "tools/call", {{"name", "echo"}, {"arguments", {{"s", "[[[[[[[[[[[["}}}}));
  EXPECT_EQ(r["result"]["structuredContent"]["s"], "[[[[[[[[[[[[");
}

TEST_F(McpServerTest, ToolCallsReturnStructuredContentAndToolFailuresAreIsError) {
  Initialize();
  json r = Send(Request(1, "tools/call", {{"name", "echo"}, {"arguments", {{"x", 1}}}}));
  EXPECT_EQ(r["result"]["isError"], false);
  EXPECT_EQ(r["result"]["structuredContent"]["x"], 1);
  EXPECT_EQ(json::parse(r["result"]["content"][0]["text"].get<std::string>())["x"], 1);
  r = Send(Request(2, "tools/call", {{"name", "echo"}, {"arguments", {{"fail", true}}}}));
  EXPECT_EQ(r["result"]["isError"], true);
  EXPECT_EQ(r["result"]["content"][0]["text"], "no such thing");
  r = Send(Request(3, "tools/call", {{"name", "nope"}}));
  EXPECT_EQ(r["error"]["code"], -32602);
  r = Send(Request(4, "tools/call", {{"name", "echo"}, {"arguments", "x"}}));
  EXPECT_EQ(r["error"]["code"], -32602);
  EXPECT_EQ(toolbox_.calls, std::vector<std::string>({"echo", "echo"}));
}

TEST_F(McpServerTest, AResourceThatIsNotThereIsMinus32002) {
  Initialize();
  json r = Send(Request(1, "resources/read", {{"uri", "fake://here"}}));
  EXPECT_EQ(r["result"]["contents"][0]["text"], "hello");
  r = Send(Request(2, "resources/read", {{"uri", "fake://gone"}}));
  EXPECT_EQ(r["error"]["code"], -32002);
  EXPECT_EQ(Send(Request(3, "resources/read"))["error"]["code"], -32602);
}

TEST_F(McpServerTest, ServeReadsOneMessagePerLineAndSkipsAnOversizeOneWithoutStopping) {
  std::string input = Request(1, "initialize", {{"protocolVersion", "2025-06-18"}}).dump() +
                      "\r\n\n   \n" + std::string(5000, 'x') + "\n" + Request(2, "ping").dump();
  std::istringstream in(input);
  std::ostringstream out;
  ASSERT_TRUE(server_.Serve(in, out).ok());
  std::vector<json> replies;
  std::istringstream lines(out.str());
  for (std::string line; std::getline(lines, line);) replies.push_back(json::parse(line));
  ASSERT_EQ(replies.size(), 3u) << out.str();
  EXPECT_EQ(replies[0]["id"], 1);
  EXPECT_EQ(replies[1]["error"]["code"], -32600);
  EXPECT_TRUE(replies[1]["id"].is_null());
  EXPECT_EQ(replies[2]["id"], 2);
  EXPECT_EQ(replies[2]["result"], json::object());
}

class RootPathsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    top_ = testing::MakeTempDir("mcp-root");
    fs::create_directories(top_ + "/root/sub");
    fs::create_directories(top_ + "/outside");
    fs::create_symlink(top_ + "/outside", top_ + "/root/out-link");
    fs::create_symlink(top_ + "/root/sub", top_ + "/root/in-link");
    fs::create_symlink(top_ + "/root", top_ + "/alias");
    auto paths = RootPaths::Create(top_ + "/alias");
    ASSERT_TRUE(paths.ok()) << paths.status();
    paths_.emplace(*paths);
    root_ = fs::canonical(top_ + "/root").string();
  }
  std::string top_, root_;
  std::optional<RootPaths> paths_;
};

TEST_F(RootPathsTest, ResolvesRelativeAndAbsolutePathsUnderTheCanonicalRoot) {
  EXPECT_EQ(paths_->root(), root_);
  EXPECT_EQ(*paths_->Resolve("sub/./x.yaml"), root_ + "/sub/x.yaml");
  EXPECT_EQ(*paths_->Resolve("new/folder/"), root_ + "/new/folder");
  EXPECT_EQ(*paths_->Resolve(root_ + "/sub"), root_ + "/sub");
  EXPECT_EQ(*paths_->Resolve(top_ + "/alias/sub"), root_ + "/sub");  // the root as given
  EXPECT_EQ(*paths_->Resolve("."), root_);
  EXPECT_EQ(paths_->Relative(root_ + "/sub/x.yaml"), "sub/x.yaml");
  EXPECT_EQ(paths_->Relative(root_), ".");
}

TEST_F(RootPathsTest, RefusesEscapesLinksAndOversizePaths) {
  auto refused = [&](const std::string& p, const std::string& why) {
    absl::StatusOr<std::string> r = paths_->Resolve(p);
    ASSERT_FALSE(r.ok()) << p << " -> " << *r;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(why)) << p;
  };
  refused("../outside", "'..' is not allowed");
  refused("sub/../../outside", "'..' is not allowed");
  refused(top_ + "/outside/x", "outside the root");
  refused(root_ + "x/y", "outside the root");  // a sibling sharing the root's name as a prefix
  refused("/", "outside the root");
  refused("out-link/secret", "out-link is a symbolic link");
  refused("in-link", "in-link is a symbolic link");  // even one that stays inside
  refused("", "empty");
  refused(std::string("a\0b", 3), "NUL");
  refused(std::string(kMaxClientPathBytes + 1, 'a'), "longer than");
}

TEST_F(RootPathsTest, CreateRefusesARootThatIsNotADirectory) {
  EXPECT_FALSE(RootPaths::Create(top_ + "/missing").ok());
  testing::WriteFile(top_ + "/file", "x");
  EXPECT_FALSE(RootPaths::Create(top_ + "/file").ok());
}

using testing::FakeLauncher;

class SextantToolboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::canonical(testing::MakeTempDir("mcp-toolbox")).string();
    SextantToolboxOptions o;
    o.root = root_;
    o.sextant_binary = "/opt/sextant";
    o.launcher = &launcher_;
    o.clock = &clock_;
    auto t = NewSextantToolbox(o);
    ASSERT_TRUE(t.ok()) << t.status();
    toolbox_ = *std::move(t);
  }
  std::string root_;
  FakeLauncher launcher_;
  FakeClock clock_;
  std::unique_ptr<Toolbox> toolbox_;
};

TEST_F(SextantToolboxTest, StartRunLaunchesSextantRunDetachedAndReturnsItsPid) {
  testing::WriteFile(root_ + "/exp.yaml", R"(name: quick
objective: {metric: loss}
parameters:
  x: {type: float, min: 0, max: 1}
trial: {command: [sh, -c, "echo loss=1"]}
)");
  ToolResult r = toolbox_->CallTool("start_run", {{"file", "exp.yaml"}, {"workers", 2}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_EQ(r.structured["pid"], 4242);
  EXPECT_EQ(r.structured["run_dir"], "runs/quick");
  ASSERT_EQ(launcher_.launched.size(), 1u);
  EXPECT_EQ(launcher_.launched[0],
            std::vector<std::string>({"/opt/sextant", "run", root_ + "/exp.yaml", "--run-dir",
                                      root_ + "/runs/quick", "--workers", "2"}));
  EXPECT_EQ(launcher_.logs[0], root_ + "/runs/quick/logs/orchestrator.log");
  // Until the process makes its store, the run is starting.
  ToolResult s = toolbox_->CallTool("run_status", {{"run_dir", "runs/quick"}});
  ASSERT_FALSE(s.is_error) << s.text;
  EXPECT_EQ(s.structured["state"], "STARTING");
  EXPECT_EQ(s.structured["done"], false);
}

TEST_F(SextantToolboxTest, StartRunRefusesAnInvalidFileOrAnEscapeWithoutLaunching) {
  testing::WriteFile(root_ + "/bad.yaml", "name: Bad Name\n");
  ToolResult r = toolbox_->CallTool("start_run", {{"file", "bad.yaml"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.text, HasSubstr("bad.yaml:1:"));
  r = toolbox_->CallTool("start_run", {{"file", "ok.yaml"}, {"run_dir", "/tmp/elsewhere"}});
  EXPECT_TRUE(r.is_error);
  r = toolbox_->CallTool("start_run", {{"file", "bad.yaml"}, {"bogus", 1}});
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.text, HasSubstr("unknown argument 'bogus'"));
  EXPECT_TRUE(launcher_.launched.empty());
}

TEST_F(SextantToolboxTest, StopRunSendsSigintToTheProcessHoldingTheRunDirectory) {
  const std::string dir = root_ + "/runs/live";
  auto held = RunDir::Acquire(dir);  // this process, as the run's orchestrator
  ASSERT_TRUE(held.ok()) << held.status();
  testing::WriteFile(dir + "/state.db", "");
  ToolResult r = toolbox_->CallTool("stop_run", {{"run_dir", "runs/live"}, {"wait_seconds", 1}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_EQ(r.structured["stopped"], false);  // it holds on: the fake signal reached nobody
  ASSERT_EQ(launcher_.signals.size(), 1u);
  EXPECT_EQ(launcher_.signals[0], std::make_pair(getpid(), SIGINT));
}

TEST_F(SextantToolboxTest, StopRunRefusesARunNoProcessHolds) {
  testing::WriteFile(root_ + "/runs/old/state.db", "");
  ToolResult r = toolbox_->CallTool("stop_run", {{"run_dir", "runs/old"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.text, HasSubstr("not running"));
  EXPECT_TRUE(launcher_.signals.empty());
}

TEST_F(SextantToolboxTest, ValidateTakesInlineYamlAndBoundsItsArguments) {
  ToolResult r = toolbox_->CallTool("validate_experiment",
                                    {{"yaml", "name: x\nobjective: {metric: loss}\nbogus: 1\n"}});
  ASSERT_FALSE(r.is_error) << r.text;
  EXPECT_EQ(r.structured["valid"], false);
  bool found = false;
  for (const json& e : r.structured["errors"]) {
    if (e["line"] == 3 && e["column"] == 1) found = true;
  }
  EXPECT_TRUE(found) << r.structured.dump();
  r = toolbox_->CallTool("validate_experiment", {{"yaml", "a"}, {"file", "b"}});
  EXPECT_TRUE(r.is_error);
  r = toolbox_->CallTool("validate_experiment", {{"file", 3}});
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.text, HasSubstr("must be a string"));
}

TEST_F(SextantToolboxTest, ReportWritesOnlyAnHtmlFile) {
  testing::WriteFile(root_ + "/runs/r/state.db", "");
  testing::WriteFile(root_ + "/exp.yaml", "name: keep\n");
  ToolResult r = toolbox_->CallTool("report", {{"run_dir", "runs/r"}, {"output", "exp.yaml"}});
  EXPECT_TRUE(r.is_error);
  EXPECT_THAT(r.text, HasSubstr("does not end in .html"));
  EXPECT_EQ(testing::ReadFile(root_ + "/exp.yaml"), "name: keep\n");
}

TEST_F(SextantToolboxTest, ResourcesAreConfinedToTheRoot) {
  absl::StatusOr<ResourceContents> r = toolbox_->ReadResource("sextant://runs/../etc/results.json");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = toolbox_->ReadResource("sextant://runs/%2e%2e/etc/results.json");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = toolbox_->ReadResource("sextant://runs/none/results.json");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  r = toolbox_->ReadResource("file:///etc/passwd");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sextant
