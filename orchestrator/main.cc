// sextant: the command-line interface (run, resume, validate, schema, status, results, events,
// report, simulate, ask, tell, import, mcp, certs), parsed with CLI11: `sextant COMMAND --help`
// describes each verb.
#include <cmath>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/duration.h"
#include "common/process_setup.h"
#include "nlohmann/json.hpp"
#include "orchestrator/ask_tell/ask_tell_command.h"
#include "orchestrator/core/command_script.h"
#include "orchestrator/core/experiment_loader.h"
#include "orchestrator/core/experiment_schema.h"
#include "orchestrator/core/federated_results.h"
#include "orchestrator/core/local_launcher.h"
#include "orchestrator/core/results.h"
#include "orchestrator/core/run_dir.h"
#include "orchestrator/core/store.h"
#include "orchestrator/import/optuna_import.h"
#include "orchestrator/mcp/mcp_command.h"
#include "orchestrator/report/report.h"
#include "orchestrator/search/search_run.h"
#include "orchestrator/simulate/simulate_command.h"
#include "rpc/certificates.h"

namespace sextant {
namespace {

// A usage error: the message and a pointer to --help on stderr, exit 2 (the contract's code for
// invalid input).
int UsageError(const std::string& why) {
  std::cerr << "sextant: " << why
            << "\nRun 'sextant --help' or 'sextant COMMAND --help' for usage.\n";
  return 2;
}

// What the verbs read from the command line (CLI11 fills it).
struct Args {
  std::string positional;                    // FILE or DIR
  std::map<std::string, std::string> flags;  // flag name (no dashes) -> value, when given
};

int Validate(const Args& a) {
  if (a.positional.empty()) return UsageError("validate needs a FILE");
  LoadResult r = LoadExperimentFile(a.positional);
  for (const LoadError& e : r.errors) std::cerr << e.ToString() << "\n";
  if (!r.ok()) return 2;
  // A warning, not an error: the script may be made before the run starts (a build step).
  for (const std::string& w : MissingCommandScriptWarnings(r.spec)) {
    std::cerr << a.positional << ": warning: " << w << "\n";
  }
  std::cout << a.positional << ": ok (" << DescribeExperiment(r.spec) << ")\n";
  return 0;
}

int Run(const Args& a, bool resume, Clock* clock) {
  if (a.positional.empty()) return UsageError(resume ? "resume needs a DIR" : "run needs a FILE");
  RunOptions options;
  options.resume = resume;
  if (resume) {
    options.run_dir = a.positional;
  } else {
    options.experiment_file = a.positional;
  }
  if (a.flags.count("run-dir")) options.run_dir = a.flags.at("run-dir");
  if (a.flags.count("listen")) options.listen = a.flags.at("listen");
  if (a.flags.count("tls-dir")) options.tls_dir = a.flags.at("tls-dir");
  options.external_participants = a.flags.count("external-participants") > 0;
  if (options.external_participants && options.tls_dir.empty()) {
    return UsageError(
        "--external-participants needs --tls-dir: a participant started by hand is known by its "
        "certificate (sextant certs issue DIR NAME --role aggregator|client --region R)");
  }
  if (a.flags.count("workers") &&
      (!absl::SimpleAtoi(a.flags.at("workers"), &options.workers) || options.workers < 1)) {
    return UsageError("--workers must be a positive integer");
  }
  if (a.flags.count("metrics-port") &&
      (!absl::SimpleAtoi(a.flags.at("metrics-port"), &options.metrics_port) ||
       options.metrics_port < 0 || options.metrics_port > 65535)) {
    return UsageError("--metrics-port must be a port number (0 picks a free one)");
  }
  if (a.flags.count("time-scale") &&
      (!absl::SimpleAtod(a.flags.at("time-scale"), &options.time_scale) ||
       options.time_scale <= 0)) {
    return UsageError("--time-scale must be a positive number");
  }
  if (a.flags.count("slurm-partition")) options.slurm_partition = a.flags.at("slurm-partition");
  if (a.flags.count("slurm-spot-partition")) {
    options.slurm_spot_partition = a.flags.at("slurm-spot-partition");
  }
  if (a.flags.count("max-cost")) {
    double v = 0;
    if (!absl::SimpleAtod(a.flags.at("max-cost"), &v) || !(v > 0)) {
      return UsageError("--max-cost must be a positive amount");
    }
    options.max_cost = v;
  }
  if (a.flags.count("max-epsilon")) {
    double v = 0;
    if (!absl::SimpleAtod(a.flags.at("max-epsilon"), &v) || !(v > 0) || !std::isfinite(v)) {
      return UsageError("--max-epsilon must be a positive number");
    }
    options.max_epsilon = v;
  }
  if (a.flags.count("max-trials")) {
    int v = 0;
    if (!resume)
      return UsageError("--max-trials applies to resume (set search.max_trials in the file)");
    if (!absl::SimpleAtoi(a.flags.at("max-trials"), &v) || v < 1) {
      return UsageError("--max-trials must be a positive integer");
    }
    options.max_trials = v;
  }
  if (a.flags.count("max-wall-time")) {
    auto v = ParseDurationSeconds(a.flags.at("max-wall-time"));
    if (!v.ok() || *v <= 0) return UsageError("--max-wall-time: invalid duration (e.g. 90s, 2h)");
    options.max_wall_time_seconds = *v;
  }
  for (const char* name : {"lease-timeout", "heartbeat"}) {
    if (!a.flags.count(name)) continue;
    auto v = ParseDurationSeconds(a.flags.at(name));
    if (!v.ok() || *v <= 0) return UsageError(absl::StrCat("--", name, ": invalid duration"));
    (std::string(name) == "lease-timeout" ? options.lease_seconds : options.heartbeat_seconds) = *v;
  }
  options.tty = isatty(STDOUT_FILENO);
  auto launcher = NewPosixProcessLauncher();
  InstallStopHandlers();
  return RunExperiment(options, RunEnv{clock, launcher.get(), &std::cout, &std::cerr});
}

// What `certs init` and `certs issue` read from the command line.
struct CertsArgs {
  std::string dir;
  std::string name;  // issue: the certificate's name
  std::string role;  // issue: empty = worker
  std::string region;
  std::string sans;  // HOST,...
  bool enroll = false;
};

// sextant certs init DIR [--san HOST,...] |
// sextant certs issue DIR NAME [--role R] [--region REG] [--san HOST,...] [--enroll]
int Certs(const CertsArgs& c, bool init) {
  IssueOptions issue;
  issue.region = c.region;
  issue.enroll = c.enroll;
  for (absl::string_view san : absl::StrSplit(c.sans, ',', absl::SkipWhitespace())) {
    issue.sans.emplace_back(absl::StripAsciiWhitespace(san));
  }
  if (!c.role.empty()) {
    std::optional<Role> role = ParseRole(c.role);
    if (!role) {
      return UsageError(
          absl::StrCat("--role '", c.role, "': not worker, client, aggregator or admin"));
    }
    issue.role = *role;
  }
  absl::Status s =
      init ? InitCertificateDirectory(c.dir, issue.sans) : IssueIntoDirectory(c.dir, c.name, issue);
  if (!s.ok()) {
    std::cerr << "sextant: certs: " << s.message() << "\n";
    return s.code() == absl::StatusCode::kAlreadyExists ||
                   s.code() == absl::StatusCode::kInvalidArgument
               ? 2
               : 1;
  }
  if (init) {
    std::cout << "sextant: wrote a private CA, certificates and tokens in " << c.dir << "\n";
  } else {
    std::cout << "sextant: wrote certificate " << c.name << " ("
              << IdentityUri(PeerIdentity{issue.role, issue.region, c.name}) << ") in " << c.dir
              << "\n";
  }
  return 0;
}

int Results(const Args& a) {
  if (a.positional.empty()) return UsageError("results needs a DIR");
  std::string format = a.flags.count("format") ? a.flags.at("format") : "table";
  if (format != "table" && format != "json" && format != "csv") {
    return UsageError("--format must be table, json or csv");
  }
  auto r = LoadResults(a.positional);
  if (!r.ok()) {
    std::cerr << "sextant: " << r.status().message() << "\n";
    return r.status().code() == absl::StatusCode::kNotFound ? 2 : 1;
  }
  if (format == "json") {
    std::cout << r->dump(2) << "\n";
  } else if (format == "csv") {
    std::cout << ResultsToCsv(*r);
  } else {
    std::cout << ResultsToTable(*r);
  }
  return 0;
}

// The workers' last heartbeats. Once the run has ended (or stopped without finishing) they
// are history: no worker runs a trial then, whatever the last sample said.
std::string WorkersLines(const std::vector<TelemetryRow>& latest, v1::RunState state, bool live,
                         const std::string& dir, double now) {
  if (state == v1::RUN_RUNNING && live) return TelemetryTable(latest, now);
  const std::string ended =
      state == v1::RUN_RUNNING
          ? absl::StrCat("it stopped without finishing; `sextant resume ", dir, "` continues it")
          : absl::StrCat("the run has ended: ", RunStateName(state));
  return TelemetryTable(latest, now, ended);
}

// The run state a results document shows (LoadResults).
v1::RunState StateOf(const nlohmann::json& results) {
  return results["state"].is_string() ? ParseRunState(results["state"].get<std::string>())
                                      : v1::RUN_STATE_UNSPECIFIED;
}

int ShowStatus(const std::string& dir, Clock* clock) {
  auto r = LoadResults(dir);
  if (!r.ok()) {
    std::cerr << "sextant: " << r.status().message() << "\n";
    return r.status().code() == absl::StatusCode::kNotFound ? 2 : 1;
  }
  std::cout << ResultsToTable(*r, 5, dir);
  auto store = Store::Open(RunDir::DbPath(dir), false, true);
  if (store.ok()) {
    auto telemetry = (*store)->LoadTelemetry(/*latest_only=*/true);
    if (telemetry.ok()) {
      std::cout << WorkersLines(*telemetry, StateOf(*r), RunDirIsLocked(dir), dir,
                                absl::ToUnixMicros(clock->Now()) / 1e6);
    }
    auto events = (*store)->LoadEvents(0, 0);
    if (events.ok()) {
      size_t from = events->size() > 5 ? events->size() - 5 : 0;
      if (from < events->size()) std::cout << "recent events:\n";
      for (size_t i = from; i < events->size(); ++i) {
        const EventRow& e = (*events)[i];
        std::cout << "  "
                  << absl::FormatTime("%H:%M:%S", absl::FromUnixMicros(e.time * 1e6),
                                      absl::LocalTimeZone())
                  << " " << e.kind << (e.trial_id ? absl::StrCat(" trial ", e.trial_id) : "")
                  << ": " << e.message << "\n";
      }
    }
  }
  return 0;
}

int Status(const Args& a, Clock* clock) {
  if (a.positional.empty()) return UsageError("status needs a DIR");
  if (!a.flags.count("watch")) return ShowStatus(a.positional, clock);
  while (true) {
    if (isatty(STDOUT_FILENO)) std::cout << "\033[H\033[2J";
    int rc = ShowStatus(a.positional, clock);
    if (rc != 0) return rc;
    auto r = LoadResults(a.positional);
    if (!r.ok() || StateOf(*r) != v1::RUN_RUNNING) return 0;
    std::cout << std::flush;
    clock->SleepFor(absl::Seconds(1));
  }
}

int Events(const Args& a) {
  if (a.positional.empty()) return UsageError("events needs a DIR");
  auto store = Store::Open(RunDir::DbPath(a.positional), false, true);
  if (!store.ok()) {
    std::cerr << "sextant: " << store.status().message() << "\n";
    return 2;
  }
  auto events = (*store)->LoadEvents(0, 0);
  if (!events.ok()) {
    std::cerr << "sextant: " << events.status().message() << "\n";
    return 1;
  }
  for (const EventRow& e : *events) {
    nlohmann::json j = {{"id", e.id}, {"time", e.time}, {"kind", e.kind}, {"message", e.message}};
    if (e.trial_id) j["trial"] = e.trial_id;
    std::cout << j.dump() << "\n";
  }
  return 0;
}

int Report(const Args& a, Clock* clock) {
  if (a.positional.empty()) return UsageError("report needs a DIR");
  if (!a.flags.count("output") || a.flags.at("output").empty()) {
    return UsageError("report needs -o FILE.html");
  }
  const std::string& out = a.flags.at("output");
  auto r = WriteReport(a.positional, out, clock->Now());
  if (!r.ok()) {
    std::cerr << "sextant: " << r.status().message() << "\n";
    return r.status().code() == absl::StatusCode::kNotFound ? 2 : 1;
  }
  const bool federated = r->rounds >= 0;
  std::cout << "sextant: wrote " << out << " ("
            << (federated ? r->rounds : static_cast<int64_t>(r->trials))
            << (federated ? " rounds, " : " trials, ") << (r->bytes + 1023) / 1024 << " KiB)\n";
  if (r->in_progress) {
    std::cerr << "sextant: the run is still in progress; the report shows it so far\n";
  }
  if (federated ? r->rounds == 0 : !r->any_completed) {
    std::cerr << "sextant: no " << (federated ? "round" : "trial") << " has completed yet\n";
  }
  return 0;
}

// The command line's verbs, registered with CLI11 one per Add* function in the order --help
// lists them, each with the action that runs it. CLI11 writes each verb's values into the
// members here, so an object outlives its parse. Not thread-safe.
class CommandLine {
 public:
  explicit CommandLine(Clock* clock);

  // Parses `args` (argv without the program name) and runs the verb they name: its exit code,
  // 0 for --help, or 2 for a usage error (with a pointer to --help on stderr).
  int Execute(std::vector<std::string> args);

 private:
  // Adds a flag that takes a value, recorded in a_.flags under its name when given.
  CLI::Option* Valued(CLI::App* verb, const std::string& name, const std::string& help);
  // Adds a flag without a value, recorded in a_.flags as "1" when given.
  CLI::Option* Boolean(CLI::App* verb, const std::string& name, const std::string& help);
  // The flags `run` and `resume` share.
  void AddRunFlags(CLI::App* verb);

  void AddRun();
  void AddResume();
  void AddValidate();
  void AddSchema();
  void AddStatus();
  void AddResults();
  void AddEvents();
  void AddReport();
  void AddSimulate();
  void AddAsk();
  void AddTell();
  void AddImport();
  void AddMcp();
  void AddCerts();

  Clock* const clock_;
  CLI::App app_;
  // What each verb runs, by its name ("certs init" for a verb's own verb).
  std::map<std::string, std::function<int()>> actions_;
  Args a_;
  std::vector<std::string> markets_;  // simulate --market REGION=MARKET, repeatable
  AskOptions ask_args_;
  TellFlags tell_args_;
  OptunaImportOptions import_args_;
  std::string import_metrics_;
  std::string mcp_root_;
  CertsArgs certs_args_;
};

CommandLine::CommandLine(Clock* clock)
    : clock_(clock),
      app_(
          "sextant: hyperparameter search and federated learning, driven by one experiment "
          "file.",
          "sextant") {
  app_.require_subcommand(1);
  app_.failure_message(CLI::FailureMessage::simple);
  AddRun();
  AddResume();
  AddValidate();
  AddSchema();
  AddStatus();
  AddResults();
  AddEvents();
  AddReport();
  AddSimulate();
  AddAsk();
  AddTell();
  AddImport();
  AddMcp();
  AddCerts();
}

CLI::Option* CommandLine::Valued(CLI::App* verb, const std::string& name, const std::string& help) {
  return verb->add_option_function<std::string>(
      "--" + name, [this, name](const std::string& v) { a_.flags.insert_or_assign(name, v); },
      help);
}

CLI::Option* CommandLine::Boolean(CLI::App* verb, const std::string& name,
                                  const std::string& help) {
  return verb->add_flag_callback(
      "--" + name, [this, name] { a_.flags.insert_or_assign(name, "1"); }, help);
}

void CommandLine::AddRunFlags(CLI::App* verb) {
  Valued(verb, "workers", "local workers (default: search.max_concurrent)");
  Valued(verb, "metrics-port",
         "serve the live report (/) and Prometheus /metrics on 127.0.0.1:PORT (0: any port)");
  Valued(verb, "tls-dir", "serve TLS with the certificates of `sextant certs init DIR`");
  Boolean(verb, "external-participants",
          "federated: aggregators and clients are started by hand on their hosts "
          "(sextant-worker --join); needs --tls-dir");
  Valued(verb, "max-cost", "replace budget.max_cost");
  Valued(verb, "max-epsilon", "replace budget.max_epsilon (a federated search with DP)");
  Valued(verb, "max-wall-time", "replace budget.max_wall_time (e.g. 90s, 2h)");
  Valued(verb, "listen", "the worker service's address (default 127.0.0.1:0)");
  Valued(verb, "lease-timeout", "a lease lapses this long after the last heartbeat (default 15s)");
  Valued(verb, "heartbeat", "how often workers heartbeat (default 2s)");
  Valued(verb, "time-scale", "multiply spot interruption times and notices by X");
  Valued(verb, "slurm-partition", "slurm: the partition of on-demand and reserved jobs");
  Valued(verb, "slurm-spot-partition", "slurm: the partition of spot jobs");
}

void CommandLine::AddRun() {
  CLI::App* run = app_.add_subcommand("run", "Run an experiment file to its end");
  run->add_option("FILE", a_.positional, "the experiment file (YAML)")->required();
  Valued(run, "run-dir", "the run directory (default runs/<name>)");
  AddRunFlags(run);
  actions_["run"] = [this] { return Run(a_, false, clock_); };
}

void CommandLine::AddResume() {
  CLI::App* resume = app_.add_subcommand("resume", "Continue a run from its run directory");
  resume->add_option("DIR", a_.positional, "the run directory")->required();
  AddRunFlags(resume);
  Valued(resume, "max-trials", "replace search.max_trials (room for more trials)");
  actions_["resume"] = [this] { return Run(a_, true, clock_); };
}

void CommandLine::AddValidate() {
  CLI::App* validate = app_.add_subcommand("validate", "Check an experiment file");
  validate->add_option("FILE", a_.positional, "the experiment file (YAML)")->required();
  actions_["validate"] = [this] { return Validate(a_); };
}

// The schema is embedded at build time, so an installed binary prints it without any file.
void CommandLine::AddSchema() {
  app_.add_subcommand("schema", "Print the experiment file's JSON Schema (for editors)");
  actions_["schema"] = [] {
    std::cout << ExperimentSchemaJson();
    return 0;
  };
}

void CommandLine::AddStatus() {
  CLI::App* status = app_.add_subcommand("status", "Show a run's trials, workers and events");
  status->add_option("DIR", a_.positional, "the run directory")->required();
  Boolean(status, "watch", "redraw every second until the run ends");
  actions_["status"] = [this] { return Status(a_, clock_); };
}

void CommandLine::AddResults() {
  CLI::App* results = app_.add_subcommand("results", "Print a run's results");
  results->add_option("DIR", a_.positional, "the run directory")->required();
  Valued(results, "format", "table (default), json or csv");
  actions_["results"] = [this] { return Results(a_); };
}

void CommandLine::AddEvents() {
  CLI::App* events = app_.add_subcommand("events", "Print a run's event log as JSON lines");
  events->add_option("DIR", a_.positional, "the run directory")->required();
  actions_["events"] = [this] { return Events(a_); };
}

void CommandLine::AddReport() {
  CLI::App* report = app_.add_subcommand("report", "Write a run's HTML report");
  report->add_option("DIR", a_.positional, "the run directory")->required();
  report
      ->add_option_function<std::string>(
          "-o,--output", [this](const std::string& v) { a_.flags["output"] = v; },
          "the HTML file to write (required)")
      ->type_name("FILE.html");
  actions_["report"] = [this] { return Report(a_, clock_); };
}

void CommandLine::AddSimulate() {
  CLI::App* simulate =
      app_.add_subcommand("simulate", "Forecast an experiment's time and cost on virtual time");
  simulate->add_option("FILE", a_.positional, "the experiment file (YAML)")->required();
  Valued(simulate, "run-dir", "the run directory (default runs/<name>)");
  simulate->add_option("--market", markets_,
                       "a federated run's what-if: REGION=spot|on_demand for that region's pools");
  Valued(simulate, "global-region", "a federated run's what-if: the global tier's region");
  Valued(simulate, "time-scale",
         "a federated run's forecast: spot interruption times multiplied by X, as in run");
  Valued(simulate, "calibrate",
         "a federated run's forecast: timed by the start-up and rounds RUN_DIR's run measured");
  actions_["simulate"] = [this]() -> int {
    SimulateOptions o;
    if (a_.flags.count("run-dir")) o.run_dir = a_.flags.at("run-dir");
    if (a_.flags.count("calibrate")) o.calibrate_run_dir = a_.flags.at("calibrate");
    if (a_.flags.count("global-region")) o.global_region = a_.flags.at("global-region");
    if (a_.flags.count("time-scale") &&
        (!absl::SimpleAtod(a_.flags.at("time-scale"), &o.time_scale) || o.time_scale <= 0)) {
      return UsageError("--time-scale must be a positive number");
    }
    for (const std::string& m : markets_) {
      const size_t eq = m.find('=');
      const std::string market = eq == std::string::npos ? "" : m.substr(eq + 1);
      if (eq == std::string::npos || (market != "spot" && market != "on_demand")) {
        return UsageError("--market takes REGION=spot or REGION=on_demand, got '" + m + "'");
      }
      o.markets[m.substr(0, eq)] = market;
    }
    o.worker_binary = BinaryBesideThisOne("sextant-worker");
    return RunSimulateCommand(a_.positional, o, std::cout, std::cerr);
  };
}

// Ask and tell (search.mode: ask_tell), against a live run or offline on its directory.
void CommandLine::AddAsk() {
  CLI::App* ask = app_.add_subcommand("ask", "Ask an ask/tell run for trials (one JSON line each)");
  ask->add_option("DIR", ask_args_.run_dir,
                  "the run directory (a live run, or one no process holds)")
      ->required();
  ask->add_option("--n", ask_args_.count, "how many trials (default 1, at most 1024)");
  ask->add_option("--wait", ask_args_.wait_seconds,
                  "live: wait up to this many seconds (at most 30) for a trial to start");
  actions_["ask"] = [this] { return RunAskCommand(ask_args_, std::cout, std::cerr, clock_); };
}

void CommandLine::AddTell() {
  TellFlags& t = tell_args_;
  CLI::App* tell = app_.add_subcommand(
      "tell", "Tell an ask/tell run a trial's result, or report an intermediate --step");
  tell->add_option("DIR", t.run_dir, "the run directory (a live run, or one no process holds)")
      ->required();
  tell->add_option("TRIAL", t.trial, "the trial id")->required();
  tell->add_option("--value", t.value, "the objective's value");
  tell->add_option("--values", t.values, "V1,V2,...: each objective's value, in order");
  tell->add_option("--state", t.state, "pruned or failed (instead of a value)");
  tell->add_option("--metrics", t.metrics,
                   "NAME=VALUE,...: further metrics (with --step: the step's)");
  tell->add_option("--step", t.step,
                   "report an intermediate step S (the fidelity) with --metrics; prints continue, "
                   "stop or pause");
  tell->add_option("--attempt", t.attempt, "the attempt (default: the one holding it)");
  tell->add_option("--error", t.error, "with --state failed: why");
  actions_["tell"] = [this] {
    return RunTellCommandLine(tell_args_, std::cout, std::cerr, clock_);
  };
}

// sextant import optuna: an Optuna study, read from its SQLite storage or journal file, as a
// run directory.
void CommandLine::AddImport() {
  CLI::App* import =
      app_.add_subcommand("import", "Import another tool's study as a run directory");
  import->require_subcommand(1);
  CLI::App* optuna = import->add_subcommand(
      "optuna",
      "Import an Optuna study from its SQLite storage or journal file (read directly; no Python)");
  optuna
      ->add_option("STORAGE", import_args_.storage,
                   "the Optuna SQLite file or its storage URL (sqlite:///optuna.db), or a "
                   "JournalFileBackend log")
      ->required();
  optuna->add_option("--study", import_args_.study,
                     "the study's name (default: the storage's only study)");
  optuna->add_option("-o,--output", import_args_.output_dir,
                     "the run directory to write (default runs/<study name>)");
  optuna->add_option("--metric", import_metrics_,
                     "NAME[,NAME...]: the objectives' metrics (default value, or values_0,...)");
  optuna->add_option(
      "--max-trials", import_args_.max_trials,
      "search.max_trials, counting the imported trials (default: their number + 100)");
  actions_["import optuna"] = [this] {
    for (absl::string_view m : absl::StrSplit(import_metrics_, ',', absl::SkipWhitespace())) {
      import_args_.metrics.emplace_back(absl::StripAsciiWhitespace(m));
    }
    return RunOptunaImport(import_args_, clock_, std::cout, std::cerr);
  };
}

// sextant mcp --root DIR: a Model Context Protocol server on stdio (orchestrator/mcp).
void CommandLine::AddMcp() {
  CLI::App* mcp = app_.add_subcommand(
      "mcp", "Serve the Model Context Protocol on stdin/stdout (tools over run directories)");
  mcp->add_option("--root", mcp_root_, "the only directory its tools read and write")->required();
  actions_["mcp"] = [this] { return RunMcpCommand(mcp_root_, clock_); };
}

void CommandLine::AddCerts() {
  CertsArgs& c = certs_args_;
  CLI::App* certs = app_.add_subcommand("certs", "Make the certificates and tokens of a TLS run");
  certs->require_subcommand(1);
  CLI::App* init = certs->add_subcommand("init", "Write a private CA, certificates and tokens");
  init->add_option("DIR", c.dir, "where to write them")->required();
  init->add_option("--san", c.sans, "HOST,...: names the servers answer to");
  CLI::App* issue = certs->add_subcommand("issue", "Issue one more certificate from the CA");
  issue->add_option("DIR", c.dir, "a directory from `certs init`")->required();
  issue->add_option("NAME", c.name, "the certificate's name")->required();
  issue->add_option("--role", c.role, "worker (default), client, aggregator or admin");
  issue->add_option("--region", c.region, "the region it belongs to");
  issue->add_option("--san", c.sans, "HOST,...: names the holder serves under");
  issue->add_flag("--enroll", c.enroll, "also write an enrolment token");
  actions_["certs init"] = [this] { return Certs(certs_args_, true); };
  actions_["certs issue"] = [this] { return Certs(certs_args_, false); };
}

int CommandLine::Execute(std::vector<std::string> args) {
  if (!args.empty() && args[0] == "help") args[0] = "--help";
  if (!args.empty() && args[0].rfind("-", 0) != 0 && !actions_.count(args[0]) &&
      args[0] != "certs" && args[0] != "import") {
    return UsageError("unknown command '" + args[0] + "'");
  }
  const bool no_args = args.empty();
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first, and consumes them
  try {
    app_.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app_.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app_.exit(e);
  } catch (const CLI::ParseError& e) {
    if (no_args) {
      std::cerr << app_.help();
      return 2;
    }
    return UsageError(e.what());
  }
  for (CLI::App* verb : app_.get_subcommands()) {
    std::string name = verb->get_name();
    for (CLI::App* sub : verb->get_subcommands()) name += " " + sub->get_name();
    return actions_.at(name)();
  }
  return UsageError("no command");
}

}  // namespace
}  // namespace sextant

int main(int argc, char** argv) {
  sextant::SetUpProcess();
  sextant::CommandLine command_line(sextant::RealClockInstance());
  return command_line.Execute(std::vector<std::string>(argv + 1, argv + argc));
}
