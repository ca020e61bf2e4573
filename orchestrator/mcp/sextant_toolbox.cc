#include "orchestrator/mcp/sextant_toolbox.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "orchestrator/ask_tell/ask_tell_command.h"
#include "orchestrator/core/command_script.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/federated_results.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/core/results.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/mcp/internal/tool_args.h"
#include "orchestrator/mcp/root_paths.h"
#include "orchestrator/report/report.h"
#include "orchestrator/report/report_data.h"
#include "orchestrator/simulate/simulate_command.h"

namespace sextant {
namespace {

namespace fs = std::filesystem;
using mcp_internal::ToolArgs;
using nlohmann::json;

// Limits on what a client may ask for.
constexpr size_t kMaxNameBytes = 256;    // a metric's name, a state
constexpr size_t kMaxErrorBytes = 4096;  // tell's error text
constexpr size_t kMaxObjectives = 64;    // tell's values
constexpr size_t kMaxMetrics = 256;      // tell's metrics
constexpr int kMaxAsk = 1024;            // ask's n, as `sextant ask --n`
constexpr double kMaxAskWait = 30;       // ask's wait_seconds, as `sextant ask --wait`
constexpr double kMaxStopWait = 60;      // stop_run's wait_seconds
constexpr int kMaxWorkers = 1024;        // start_run's workers
// list_runs and resources/list: how deep under the root, how many entries looked at, how many
// runs listed.
constexpr int kScanDepth = 4;
constexpr int kScanEntries = 20000;
constexpr size_t kMaxRuns = 500;
// Runs started by this server whose exit is remembered for run_status.
constexpr size_t kMaxRemembered = 256;
constexpr size_t kLogTailBytes = 4096;

constexpr absl::string_view kUriPrefix = "sextant://runs/";
constexpr absl::string_view kResultsSuffix = "/results.json";
constexpr absl::string_view kReportSuffix = "/report.html";

// One tool: what tools/list says of it, and what runs it.
struct Tool {
  const char* name;
  const char* title;
  const char* description;
  const char* input_schema;  // JSON
};

const Tool kTools[] = {
    {"validate_experiment", "Validate an experiment file",
     "Checks a Sextant experiment (YAML) as `sextant validate` does: give `file` (a path under "
     "the root) or `yaml` (the text itself; `name` is the file it stands for, default "
     "inline.yaml, whose folder is the trial's working directory). Returns valid, each error "
     "with its line and column (1-based), warnings, and what the experiment asks for.",
     R"json({"type": "object", "additionalProperties": false, "properties": {
          "file": {"type": "string", "maxLength": 4096, "description": "the experiment file"},
          "yaml": {"type": "string", "maxLength": 4194304, "description": "experiment YAML text"},
          "name": {"type": "string", "maxLength": 4096,
                   "description": "with yaml: the file it stands for (default inline.yaml)"}}})json"},
    {"start_run", "Start a run",
     "Starts `sextant run FILE --run-dir DIR` as a process of its own and returns at once with "
     "its pid and run directory (default runs/<name> under the root); poll run_status. With "
     "resume: true, continues the run in run_dir (`sextant resume DIR`) instead.",
     R"json({"type": "object", "additionalProperties": false, "properties": {
          "file": {"type": "string", "maxLength": 4096, "description": "the experiment file"},
          "run_dir": {"type": "string", "maxLength": 4096, "description": "the run directory"},
          "resume": {"type": "boolean", "description": "continue the run in run_dir"},
          "workers": {"type": "integer", "minimum": 1, "maximum": 1024,
                      "description": "local workers (default search.max_concurrent)"}}})json"},
    {"run_status", "A run's status",
     "The state of a run directory: its state, whether a process holds it (live), trial counts "
     "by state, the best trial and the cost so far; done is true once nothing runs it.",
     R"json({"type": "object", "additionalProperties": false, "required": ["run_dir"],
         "properties": {"run_dir": {"type": "string", "maxLength": 4096}}})json"},
    {"results", "A run's results",
     "The results document of `sextant results DIR --format json`: experiment, state, "
     "objective, best, every trial, cost (and rounds for a federated run).",
     R"json({"type": "object", "additionalProperties": false, "required": ["run_dir"],
         "properties": {"run_dir": {"type": "string", "maxLength": 4096}}})json"},
    {"ask", "Ask an ask/tell run for trials",
     "`sextant ask`: up to n trials to evaluate from a run with search.mode: ask_tell (live, or "
     "offline when no process holds it), each with its params and trial id.",
     R"json({"type": "object", "additionalProperties": false, "required": ["run_dir"],
         "properties": {"run_dir": {"type": "string", "maxLength": 4096},
          "n": {"type": "integer", "minimum": 1, "maximum": 1024},
          "wait_seconds": {"type": "number", "minimum": 0, "maximum": 30}}})json"},
    {"tell", "Tell an ask/tell run a result",
     "`sextant tell`: a trial's value (or values, one per objective), or state pruned|failed, "
     "or an intermediate step with its metrics (the answer is continue, stop or pause).",
     R"json({"type": "object", "additionalProperties": false, "required": ["run_dir", "trial"],
         "properties": {"run_dir": {"type": "string", "maxLength": 4096},
          "trial": {"type": "integer", "minimum": 1},
          "value": {"type": "number"},
          "values": {"type": "array", "items": {"type": "number"}, "maxItems": 64},
          "state": {"type": "string", "enum": ["pruned", "failed"]},
          "metrics": {"type": "object", "additionalProperties": {"type": "number"}},
          "step": {"type": "number"},
          "attempt": {"type": "integer", "minimum": 0},
          "error": {"type": "string", "maxLength": 4096}}})json"},
    {"report", "Write a run's HTML report",
     "`sextant report`: writes the run's self-contained HTML report (default report.html in the "
     "run directory) and returns its path.",
     R"json({"type": "object", "additionalProperties": false, "required": ["run_dir"],
         "properties": {"run_dir": {"type": "string", "maxLength": 4096},
          "output": {"type": "string", "maxLength": 4096,
                     "description": "the HTML file (*.html)"}}})json"},
    {"simulate", "Simulate an experiment",
     "`sextant simulate`: runs the experiment on virtual time against simulated instances and "
     "writes a run directory (default runs/<name>-sim), then returns its forecast: cost, "
     "virtual wall time, preemptions and the best value.",
     R"json({"type": "object", "additionalProperties": false, "required": ["file"],
         "properties": {"file": {"type": "string", "maxLength": 4096},
          "run_dir": {"type": "string", "maxLength": 4096}}})json"},
    {"list_runs", "List run directories",
     "The run directories under the root (up to 4 levels deep), each with its experiment, "
     "state, whether a process holds it, its trial count and best value.",
     R"json({"type": "object", "additionalProperties": false, "properties": {}})json"},
    {"stop_run", "Stop a run",
     "Asks the process running a run directory to stop, as Ctrl-C does (SIGINT): running trials "
     "are cancelled and the run can be resumed. Waits up to wait_seconds (default 10) for it.",
     R"json({"type": "object", "additionalProperties": false, "required": ["run_dir"],
         "properties": {"run_dir": {"type": "string", "maxLength": 4096},
          "wait_seconds": {"type": "number", "minimum": 0, "maximum": 60}}})json"},
};

// A process start_run started.
struct Started {
  pid_t pid = 0;
  std::string log;
  std::optional<int> exit_code;  // once reaped: the code, or 128 + the signal
};

std::string PercentEncode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', hex[c >> 4], hex[c & 15]};
    }
  }
  return out;
}

absl::StatusOr<std::string> PercentDecode(absl::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      return absl::InvalidArgumentError("a '%' in the URI is not followed by two hex digits");
    }
    int v = 0;
    (void)absl::SimpleHexAtoi(s.substr(i + 1, 2), &v);
    out.push_back(static_cast<char>(v));
    i += 2;
  }
  return out;
}

std::string ReadTail(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(size > static_cast<std::streamoff>(bytes) ? size - bytes : 0);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The pid recorded in a run directory's lock file by the process that holds it (RunDir).
std::optional<pid_t> LockHolder(const std::string& dir) {
  std::string text = ReadTail(dir + "/lock", 32);
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) || pid <= 1) return std::nullopt;
  return pid;
}

// The numbers a person polls for, from a results document.
json Summary(const json& results) {
  json by_state = json::object();
  for (const json& t : results.value("trials", json::array())) {
    by_state[t.value("state", "UNKNOWN")] = by_state.value(t.value("state", "UNKNOWN"), 0) + 1;
  }
  return json{{"experiment", results.value("experiment", json())},
              {"state", results.value("state", json())},
              {"trials",
               {{"total", results.value("trials", json::array()).size()}, {"by_state", by_state}}},
              {"best", results.value("best", json())},
              {"cost", results.value("cost", json())}};
}

class SextantToolboxImpl final : public Toolbox {
 public:
  SextantToolboxImpl(RootPaths paths, const SextantToolboxOptions& options)
      : paths_(std::move(paths)), options_(options) {
    if (options_.clock == nullptr) options_.clock = RealClockInstance();
    handlers_ = {
        {"validate_experiment", [this](const ToolArgs& a) { return Validate(a); }},
        {"start_run", [this](const ToolArgs& a) { return StartRun(a); }},
        {"run_status", [this](const ToolArgs& a) { return RunStatus(a); }},
        {"results", [this](const ToolArgs& a) { return Results(a); }},
        {"ask", [this](const ToolArgs& a) { return Ask(a); }},
        {"tell", [this](const ToolArgs& a) { return Tell(a); }},
        {"report", [this](const ToolArgs& a) { return Report(a); }},
        {"simulate", [this](const ToolArgs& a) { return Simulate(a); }},
        {"list_runs", [this](const ToolArgs& a) { return ListRuns(a); }},
        {"stop_run", [this](const ToolArgs& a) { return StopRun(a); }},
    };
  }

  json ListTools() override {
    json tools = json::array();
    for (const Tool& t : kTools) {
      tools.push_back({{"name", t.name},
                       {"title", t.title},
                       {"description", t.description},
                       {"inputSchema", json::parse(t.input_schema)}});
    }
    return tools;
  }

  ToolResult CallTool(const std::string& name, const json& arguments) override {
    Reap();
    auto it = handlers_.find(name);
    if (it == handlers_.end())
      return ToolResult::Error(absl::NotFoundError("no such tool: " + name));
    absl::StatusOr<ToolResult> r = it->second(ToolArgs(arguments));
    if (!r.ok()) return ToolResult::Error(r.status());
    return *std::move(r);
  }

  json ListResources() override {
    json out = json::array();
    for (const std::string& dir : ScanRuns()) {
      const std::string name = paths_.Relative(dir);
      const std::string base = absl::StrCat(kUriPrefix, PercentEncode(name));
      out.push_back({{"uri", base + std::string(kResultsSuffix)},
                     {"name", name + "/results.json"},
                     {"title", "Results of " + name},
                     {"mimeType", "application/json"}});
      out.push_back({{"uri", base + std::string(kReportSuffix)},
                     {"name", name + "/report.html"},
                     {"title", "Report of " + name},
                     {"mimeType", "text/html"}});
    }
    return out;
  }

  json ListResourceTemplates() override {
    return json::array({{{"uriTemplate", "sextant://runs/{+run}/results.json"},
                         {"name", "results"},
                         {"description",
                          "A run's results (sextant results --format json); run is the run "
                          "directory's path under the root"},
                         {"mimeType", "application/json"}},
                        {{"uriTemplate", "sextant://runs/{+run}/report.html"},
                         {"name", "report"},
                         {"description", "A run's HTML report (sextant report)"},
                         {"mimeType", "text/html"}}});
  }

  absl::StatusOr<ResourceContents> ReadResource(const std::string& uri) override {
    absl::string_view rest = uri;
    const bool is_results = absl::EndsWith(rest, kResultsSuffix);
    if (!absl::ConsumePrefix(&rest, kUriPrefix) || !(absl::ConsumeSuffix(&rest, kResultsSuffix) ||
                                                     absl::ConsumeSuffix(&rest, kReportSuffix))) {
      return absl::NotFoundError(absl::StrCat(
          "no resource ", uri.substr(0, 200),
          " (resources are sextant://runs/RUN/results.json and sextant://runs/RUN/report.html)"));
    }
    SEXTANT_ASSIGN_OR_RETURN(std::string name, PercentDecode(rest));
    SEXTANT_ASSIGN_OR_RETURN(std::string dir, RunDirectory(name));
    if (is_results) {
      SEXTANT_ASSIGN_OR_RETURN(json results, LoadResults(dir));
      return ResourceContents{uri, "application/json",
                              results.dump(2, ' ', false, json::error_handler_t::replace)};
    }
    SEXTANT_ASSIGN_OR_RETURN(ReportData data, LoadReportData(dir, options_.clock->Now()));
    return ResourceContents{uri, "text/html", RenderReportHtml(data)};
  }

 private:
  using Handler = std::function<absl::StatusOr<ToolResult>(const ToolArgs&)>;

  // A run directory under the root: NotFound when it holds no store.
  absl::StatusOr<std::string> RunDirectory(const std::string& path) const {
    SEXTANT_ASSIGN_OR_RETURN(std::string dir, paths_.Resolve(path));
    std::error_code ec;
    if (!fs::exists(RunDir::DbPath(dir), ec)) {
      return absl::NotFoundError(
          absl::StrCat(paths_.Relative(dir), " is not a Sextant run directory (no state.db)"));
    }
    return dir;
  }

  // Reaps the processes start_run started that have exited, and forgets the oldest of them
  // when there are too many to remember.
  void Reap() {
    for (auto& [dir, s] : started_) {
      if (s.exit_code) continue;
      std::optional<int> status = options_.launcher->Poll(s.pid);
      if (!status) continue;
      s.exit_code = WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status);
    }
    for (auto it = started_.begin(); it != started_.end() && started_.size() > kMaxRemembered;) {
      it = it->second.exit_code ? started_.erase(it) : std::next(it);
    }
  }

  // The run directories under the root (kScanDepth levels, no link followed), sorted; at most
  // kMaxRuns of them, from the first kScanEntries entries walked.
  std::vector<std::string> ScanRuns() const {
    std::vector<std::string> runs;
    std::error_code ec;
    fs::recursive_directory_iterator it(paths_.root(),
                                        fs::directory_options::skip_permission_denied, ec);
    int seen = 0;
    for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (++seen > kScanEntries || runs.size() >= kMaxRuns) break;
      // Links are never followed (the iterator's default): a run is listed where it lies.
      if (it->is_symlink(ec) || !it->is_directory(ec)) continue;
      if (fs::exists(RunDir::DbPath(it->path().string()), ec)) {
        runs.push_back(it->path().string());
        it.disable_recursion_pending();  // a run's own folders hold no runs
      } else if (it.depth() + 1 >= kScanDepth) {
        it.disable_recursion_pending();
      }
    }
    std::sort(runs.begin(), runs.end());
    return runs;
  }

  // `sextant validate`, on a file or on inline text.
  absl::StatusOr<ToolResult> Validate(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys({"file", "yaml", "name"}));
    SEXTANT_ASSIGN_OR_RETURN(auto file, a.OptString("file", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(auto yaml, a.OptString("yaml", kMaxExperimentFileBytes));
    SEXTANT_ASSIGN_OR_RETURN(auto name, a.OptString("name", kMaxClientPathBytes));
    if (file.has_value() == yaml.has_value()) {
      return absl::InvalidArgumentError("give either file (a path) or yaml (the text), not both");
    }
    SEXTANT_ASSIGN_OR_RETURN(std::string path,
                             paths_.Resolve(file ? *file : name.value_or("inline.yaml")));
    const std::string shown = paths_.Relative(path);
    LoadResult r = file ? LoadExperimentFile(path) : LoadExperimentFromString(*yaml, path);
    json errors = json::array();
    std::string text;
    for (const LoadError& e : r.errors) {
      LoadError named = e;
      named.file = shown;
      errors.push_back({{"file", shown},
                        {"line", e.line},
                        {"column", e.col},
                        {"message", e.message},
                        {"text", named.ToString()}});
      absl::StrAppend(&text, named.ToString(), "\n");
    }
    json out{{"valid", r.ok()}, {"file", shown}, {"errors", errors}, {"warnings", json::array()}};
    if (r.ok()) {
      for (const std::string& w : MissingCommandScriptWarnings(r.spec)) {
        out["warnings"].push_back(w);
        absl::StrAppend(&text, shown, ": warning: ", w, "\n");
      }
      out["name"] = r.spec.name();
      out["description"] = DescribeExperiment(r.spec);
      absl::StrAppend(&text, shown, ": ok (", DescribeExperiment(r.spec), ")\n");
    }
    return ToolResult::Ok(std::move(out), text);
  }

  absl::StatusOr<ToolResult> StartRun(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys({"file", "run_dir", "resume", "workers"}));
    SEXTANT_ASSIGN_OR_RETURN(auto file, a.OptString("file", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(auto run_dir, a.OptString("run_dir", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(auto resume, a.OptBool("resume"));
    SEXTANT_ASSIGN_OR_RETURN(auto workers, a.OptInt("workers", 1, kMaxWorkers));
    std::vector<std::string> argv = {options_.sextant_binary};
    std::string dir;
    if (resume.value_or(false)) {
      if (file) return absl::InvalidArgumentError("resume continues run_dir; give no file");
      if (!run_dir) return absl::InvalidArgumentError("resume needs run_dir");
      SEXTANT_ASSIGN_OR_RETURN(dir, RunDirectory(*run_dir));
      argv.insert(argv.end(), {"resume", dir});
    } else {
      if (!file) return absl::InvalidArgumentError("argument 'file': required (the experiment)");
      SEXTANT_ASSIGN_OR_RETURN(std::string path, paths_.Resolve(*file));
      // Checked here as well as by the run, so that a bad file is this call's error.
      LoadResult loaded = LoadExperimentFile(path);
      if (!loaded.ok()) {
        std::string lines;
        for (const LoadError& e : loaded.errors) absl::StrAppend(&lines, "\n", e.ToString());
        return absl::InvalidArgumentError(absl::StrCat("the experiment is not valid:", lines));
      }
      SEXTANT_ASSIGN_OR_RETURN(dir, paths_.Resolve(run_dir.value_or("runs/" + loaded.spec.name())));
      if (fs::exists(RunDir::DbPath(dir))) {
        return absl::FailedPreconditionError(
            absl::StrCat(paths_.Relative(dir),
                         " already holds a run; start_run with resume: "
                         "true continues it, or pick another run_dir"));
      }
      argv.insert(argv.end(), {"run", path, "--run-dir", dir});
    }
    if (RunDirIsLocked(dir)) {
      return absl::FailedPreconditionError(
          absl::StrCat(paths_.Relative(dir), " is in use by another sextant process (pid ",
                       LockHolder(dir) ? absl::StrCat(*LockHolder(dir)) : "unknown", ")"));
    }
    if (workers) argv.insert(argv.end(), {"--workers", absl::StrCat(*workers)});
    // The run's own output goes beside its trials' logs; the folders are private as RunDir
    // makes them.
    const std::string logs = dir + "/logs";
    std::error_code ec;
    fs::create_directories(logs, ec);
    if (ec || ::chmod(dir.c_str(), 0700) != 0 || ::chmod(logs.c_str(), 0700) != 0) {
      return absl::InternalError(absl::StrCat(logs, ": cannot create: ", ec.message()));
    }
    const std::string log = logs + "/orchestrator.log";
    SEXTANT_ASSIGN_OR_RETURN(pid_t pid, options_.launcher->Launch(argv, log));
    started_[dir] = Started{pid, log, std::nullopt};
    json out{{"run_dir", paths_.Relative(dir)},
             {"pid", pid},
             {"log", paths_.Relative(log)},
             {"command", argv}};
    return ToolResult::Ok(out, absl::StrCat("started ", paths_.Relative(dir), " (pid ", pid,
                                            "); poll run_status until done"));
  }

  absl::StatusOr<ToolResult> RunStatus(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys({"run_dir"}));
    SEXTANT_ASSIGN_OR_RETURN(std::string given, a.String("run_dir", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(std::string dir, paths_.Resolve(given));
    auto started = started_.find(dir);
    json process;
    if (started != started_.end()) {
      process = {
          {"pid", started->second.pid},
          {"running", !started->second.exit_code.has_value()},
          {"exit_code", started->second.exit_code ? json(*started->second.exit_code) : json()}};
    }
    const bool ours_running = started != started_.end() && !started->second.exit_code;
    absl::StatusOr<json> results =
        fs::exists(RunDir::DbPath(dir)) ? LoadResults(dir) : absl::NotFoundError("no state.db yet");
    if (!results.ok()) {
      if (ours_running) {  // started, and has not made its store yet
        return ToolResult::Ok(json{{"run_dir", paths_.Relative(dir)},
                                   {"state", "STARTING"},
                                   {"live", true},
                                   {"done", false},
                                   {"process", process}});
      }
      if (started != started_.end()) {
        return absl::FailedPreconditionError(
            absl::StrCat("the run exited with code ", *started->second.exit_code,
                         " before it made its store; the end of its log:\n",
                         ReadTail(started->second.log, kLogTailBytes)));
      }
      if (results.status().code() == absl::StatusCode::kNotFound) {
        return absl::NotFoundError(
            absl::StrCat(paths_.Relative(dir), " is not a Sextant run directory (no state.db)"));
      }
      return results.status();
    }
    const bool live = RunDirIsLocked(dir);
    json out = Summary(*results);
    out["run_dir"] = paths_.Relative(dir);
    out["live"] = live;
    out["done"] = !live && !ours_running;
    if (live && LockHolder(dir)) out["pid"] = *LockHolder(dir);
    if (!process.is_null()) out["process"] = process;
    if (started != started_.end() && started->second.exit_code.value_or(0) != 0) {
      out["log_tail"] = ReadTail(started->second.log, kLogTailBytes);
    }
    return ToolResult::Ok(std::move(out));
  }

  absl::StatusOr<ToolResult> Results(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys({"run_dir"}));
    SEXTANT_ASSIGN_OR_RETURN(std::string given, a.String("run_dir", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(std::string dir, RunDirectory(given));
    SEXTANT_ASSIGN_OR_RETURN(json results, LoadResults(dir));
    return ToolResult::Ok(std::move(results));
  }

  // A CLI verb's exit code and error stream as a status: its err text is the message.
  static absl::Status VerbStatus(int rc, const std::string& err) {
    if (rc == 0) return absl::OkStatus();
    std::string message(absl::StripTrailingAsciiWhitespace(err));
    if (message.empty()) message = absl::StrCat("failed (exit code ", rc, ")");
    return rc == 2 ? absl::InvalidArgumentError(message) : absl::InternalError(message);
  }

  absl::StatusOr<ToolResult> Ask(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys({"run_dir", "n", "wait_seconds"}));
    SEXTANT_ASSIGN_OR_RETURN(std::string given, a.String("run_dir", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(auto n, a.OptInt("n", 1, kMaxAsk));
    SEXTANT_ASSIGN_OR_RETURN(auto wait, a.OptNumber("wait_seconds", 0, kMaxAskWait));
    AskOptions ask;
    SEXTANT_ASSIGN_OR_RETURN(ask.run_dir, RunDirectory(given));
    ask.count = static_cast<int>(n.value_or(1));
    ask.wait_seconds = wait.value_or(0);
    std::ostringstream out, err;
    SEXTANT_RETURN_IF_ERROR(VerbStatus(RunAskCommand(ask, out, err, options_.clock), err.str()));
    json trials = json::array();
    for (absl::string_view line : absl::StrSplit(out.str(), '\n', absl::SkipWhitespace())) {
      json t = json::parse(line, nullptr, false);
      if (!t.is_discarded()) trials.push_back(std::move(t));
    }
    json result{{"trials", trials}};
    if (!err.str().empty())
      result["note"] = std::string(absl::StripTrailingAsciiWhitespace(err.str()));
    return ToolResult::Ok(std::move(result));
  }

  absl::StatusOr<ToolResult> Tell(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys(
        {"run_dir", "trial", "value", "values", "state", "metrics", "step", "attempt", "error"}));
    SEXTANT_ASSIGN_OR_RETURN(std::string given, a.String("run_dir", kMaxClientPathBytes));
    TellOptions tell;
    SEXTANT_ASSIGN_OR_RETURN(tell.run_dir, RunDirectory(given));
    SEXTANT_ASSIGN_OR_RETURN(auto trial, a.OptInt("trial", 1, int64_t{1} << 53));
    if (!trial) return absl::InvalidArgumentError("argument 'trial': required");
    tell.trial = *trial;
    SEXTANT_ASSIGN_OR_RETURN(auto attempt, a.OptInt("attempt", 0, 1 << 30));
    tell.attempt = static_cast<int>(attempt.value_or(0));
    SEXTANT_ASSIGN_OR_RETURN(tell.value, a.OptNumber("value", -1e308, 1e308));
    SEXTANT_ASSIGN_OR_RETURN(auto values, a.OptNumbers("values", kMaxObjectives));
    tell.values = values.value_or(std::vector<double>{});
    SEXTANT_ASSIGN_OR_RETURN(auto state, a.OptString("state", kMaxNameBytes));
    tell.state = state.value_or("");
    if (!tell.state.empty() && tell.state != "pruned" && tell.state != "failed") {
      return absl::InvalidArgumentError("argument 'state': pruned or failed");
    }
    SEXTANT_ASSIGN_OR_RETURN(auto metrics, a.OptNumberMap("metrics", kMaxMetrics, kMaxNameBytes));
    tell.metrics = metrics.value_or(std::map<std::string, double>{});
    SEXTANT_ASSIGN_OR_RETURN(tell.step, a.OptNumber("step", -1e308, 1e308));
    SEXTANT_ASSIGN_OR_RETURN(auto error, a.OptString("error", kMaxErrorBytes));
    tell.error = error.value_or("");
    const int choices =
        tell.value.has_value() + !tell.values.empty() + !tell.state.empty() + tell.step.has_value();
    if (choices > 1) {
      return absl::InvalidArgumentError("give one of value, values, state and step");
    }
    std::ostringstream out, err;
    SEXTANT_RETURN_IF_ERROR(VerbStatus(RunTellCommand(tell, out, err, options_.clock), err.str()));
    json told = json::parse(out.str(), nullptr, false);
    if (told.is_discarded() || !told.is_object()) told = json{{"output", out.str()}};
    return ToolResult::Ok(std::move(told));
  }

  absl::StatusOr<ToolResult> Report(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys({"run_dir", "output"}));
    SEXTANT_ASSIGN_OR_RETURN(std::string given, a.String("run_dir", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(std::string dir, RunDirectory(given));
    SEXTANT_ASSIGN_OR_RETURN(auto output, a.OptString("output", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(
        std::string path, paths_.Resolve(output.value_or(paths_.Relative(dir) + "/report.html")));
    // Only an HTML file: the report replaces what is there, and must not replace an experiment.
    if (!absl::EndsWith(path, ".html")) {
      return absl::InvalidArgumentError(
          absl::StrCat("argument 'output': ", paths_.Relative(path), " does not end in .html"));
    }
    std::error_code ec;
    if (!fs::is_directory(fs::path(path).parent_path(), ec)) {
      return absl::InvalidArgumentError(
          absl::StrCat(paths_.Relative(path), ": its folder does not exist"));
    }
    SEXTANT_ASSIGN_OR_RETURN(ReportFile r, WriteReport(dir, path, options_.clock->Now()));
    json out{{"path", paths_.Relative(path)},
             {"absolute_path", path},
             {"bytes", r.bytes},
             {"trials", r.trials},
             {"in_progress", r.in_progress},
             {"any_completed", r.any_completed}};
    if (r.rounds >= 0) out["rounds"] = r.rounds;
    return ToolResult::Ok(std::move(out));
  }

  absl::StatusOr<ToolResult> Simulate(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys({"file", "run_dir"}));
    SEXTANT_ASSIGN_OR_RETURN(std::string file, a.String("file", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(auto run_dir, a.OptString("run_dir", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(std::string path, paths_.Resolve(file));
    std::string dir;
    if (run_dir) {
      SEXTANT_ASSIGN_OR_RETURN(dir, paths_.Resolve(*run_dir));
    } else {
      // The verb's default (runs/<name>-sim), under the root rather than the current folder.
      LoadResult loaded = LoadExperimentFile(path);
      SEXTANT_ASSIGN_OR_RETURN(
          dir,
          paths_.Resolve("runs/" + (loaded.ok() ? loaded.spec.name() : "experiment") + "-sim"));
    }
    std::ostringstream out, err;
    SimulateOptions options;
    options.run_dir = dir;
    options.worker_binary = BinaryBesideThisOne("sextant-worker");
    SEXTANT_RETURN_IF_ERROR(VerbStatus(RunSimulateCommand(path, options, out, err), err.str()));
    // A plain federated run is forecast, not simulated: there is no run directory to read.
    if (!std::filesystem::exists(RunDir::DbPath(dir))) {
      return ToolResult::Ok(json{{"forecast", out.str()}}, out.str());
    }
    SEXTANT_ASSIGN_OR_RETURN(json results, LoadResults(dir));
    json summary = Summary(results);
    summary["run_dir"] = paths_.Relative(dir);
    summary["forecast"] = out.str();
    return ToolResult::Ok(std::move(summary), out.str());
  }

  absl::StatusOr<ToolResult> ListRuns(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys({}));
    json runs = json::array();
    for (const std::string& dir : ScanRuns()) {
      json run{{"run_dir", paths_.Relative(dir)}, {"live", RunDirIsLocked(dir)}};
      absl::StatusOr<json> results = LoadResults(dir);
      if (results.ok()) {
        json s = Summary(*results);
        run["experiment"] = s["experiment"];
        run["state"] = s["state"];
        run["trials"] = s["trials"]["total"];
        run["best_value"] = s["best"].is_object() ? s["best"].value("value", json()) : json();
      } else {
        run["error"] = std::string(results.status().message());
      }
      runs.push_back(std::move(run));
    }
    return ToolResult::Ok(json{{"root", paths_.root()}, {"runs", runs}});
  }

  absl::StatusOr<ToolResult> StopRun(const ToolArgs& a) {
    SEXTANT_RETURN_IF_ERROR(a.OnlyKeys({"run_dir", "wait_seconds"}));
    SEXTANT_ASSIGN_OR_RETURN(std::string given, a.String("run_dir", kMaxClientPathBytes));
    SEXTANT_ASSIGN_OR_RETURN(auto wait, a.OptNumber("wait_seconds", 0, kMaxStopWait));
    SEXTANT_ASSIGN_OR_RETURN(std::string dir, RunDirectory(given));
    // The holder of the run directory's lock is its one orchestrator; the lock file names it.
    std::optional<pid_t> pid = LockHolder(dir);
    if (!RunDirIsLocked(dir) || !pid) {
      return absl::FailedPreconditionError(
          absl::StrCat(paths_.Relative(dir), " is not running: no process holds it"));
    }
    options_.launcher->Signal(*pid, SIGINT);
    const absl::Time give_up = options_.clock->Now() + absl::Seconds(wait.value_or(10));
    while (RunDirIsLocked(dir) && options_.clock->Now() < give_up) {
      options_.clock->SleepFor(absl::Milliseconds(100));
      Reap();
    }
    const bool stopped = !RunDirIsLocked(dir);
    json out{{"run_dir", paths_.Relative(dir)},
             {"pid", *pid},
             {"signal", "SIGINT"},
             {"stopped", stopped}};
    absl::StatusOr<json> results = LoadResults(dir);
    if (results.ok()) out["state"] = (*results)["state"];
    return ToolResult::Ok(std::move(out));
  }

  RootPaths paths_;
  SextantToolboxOptions options_;
  std::map<std::string, Handler> handlers_;
  std::map<std::string, Started> started_;  // by run directory
};

}  // namespace

absl::StatusOr<std::unique_ptr<Toolbox>> NewSextantToolbox(const SextantToolboxOptions& options) {
  if (options.launcher == nullptr || options.sextant_binary.empty()) {
    return absl::InvalidArgumentError("the MCP toolbox needs a launcher and the sextant binary");
  }
  SEXTANT_ASSIGN_OR_RETURN(RootPaths paths, RootPaths::Create(options.root));
  return std::unique_ptr<Toolbox>(new SextantToolboxImpl(std::move(paths), options));
}

}  // namespace sextant
