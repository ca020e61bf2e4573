// sextant: the command-line interface (run, resume, validate, status, results, events).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/duration.h"
#include "nlohmann/json.hpp"
#include "orchestrator/cost/simulate_command.h"
#include "orchestrator/experiment_loader.h"
#include "orchestrator/local_launcher.h"
#include "orchestrator/orchestrator.h"
#include "orchestrator/report.h"
#include "orchestrator/results.h"
#include "orchestrator/run_dir.h"
#include "orchestrator/store.h"
#include "rpc/certificates.h"

namespace sextant {
namespace {

constexpr const char* kUsage = R"(usage:
  sextant run FILE [--run-dir DIR] [--workers N] [--listen ADDR] [--metrics-port PORT]
              [--time-scale X] [--slurm-partition P] [--slurm-spot-partition P]
              [--tls-dir DIR] [--max-cost AMOUNT] [--max-wall-time DURATION]
  sextant resume DIR [--workers N] [--metrics-port PORT] [--tls-dir DIR]
              [--max-cost AMOUNT] [--max-wall-time DURATION]  (raise a spent budget)
  sextant certs init DIR [--san HOST,...]
  sextant certs issue DIR NAME [--role worker|client|aggregator|admin] [--region REGION]
              [--san HOST,...] [--enroll]
  sextant validate FILE
  sextant status DIR [--watch]
  sextant results DIR [--format table|json|csv]
  sextant events DIR
  sextant report DIR -o FILE.html
  sextant simulate FILE [--run-dir DIR]
)";

int Usage(const std::string& why) {
  if (!why.empty()) std::cerr << "sextant: " << why << "\n";
  std::cerr << kUsage;
  return 2;
}

// Splits "cmd POSITIONAL --flag value ..." into one positional and the flags.
struct Args {
  std::string positional;
  std::map<std::string, std::string> flags;
  std::string error;
};

Args ParseArgs(int argc, char** argv, int start, const std::set<std::string>& valued,
               const std::set<std::string>& boolean) {
  Args a;
  for (int i = start; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) == 0) {
      std::string name = arg.substr(2), value;
      size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (boolean.count(name)) {
        a.flags.insert_or_assign(name, std::string(1, '1'));
      } else if (valued.count(name)) {
        if (eq == std::string::npos) {
          if (i + 1 >= argc) {
            a.error = absl::StrCat("--", name, " needs a value");
            return a;
          }
          value = argv[++i];
        }
        a.flags.insert_or_assign(name, value);
      } else {
        a.error = absl::StrCat("unknown option ", arg);
        return a;
      }
    } else if (a.positional.empty()) {
      a.positional = arg;
    } else {
      a.error = absl::StrCat("unexpected argument ", arg);
      return a;
    }
  }
  return a;
}

int Validate(const Args& a) {
  if (a.positional.empty()) return Usage("validate needs a FILE");
  LoadResult r = LoadExperimentFile(a.positional);
  for (const LoadError& e : r.errors) std::cerr << e.ToString() << "\n";
  if (!r.ok()) return 2;
  std::cout << a.positional << ": ok (" << r.spec.parameters_size() << " parameters, "
            << r.spec.search().max_trials() << " trials)\n";
  return 0;
}

int Run(const Args& a, bool resume) {
  if (a.positional.empty()) return Usage(resume ? "resume needs a DIR" : "run needs a FILE");
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
  if (a.flags.count("workers") &&
      (!absl::SimpleAtoi(a.flags.at("workers"), &options.workers) || options.workers < 1)) {
    return Usage("--workers must be a positive integer");
  }
  if (a.flags.count("metrics-port") &&
      (!absl::SimpleAtoi(a.flags.at("metrics-port"), &options.metrics_port) ||
       options.metrics_port < 0 || options.metrics_port > 65535)) {
    return Usage("--metrics-port must be a port number (0 picks a free one)");
  }
  if (a.flags.count("time-scale") &&
      (!absl::SimpleAtod(a.flags.at("time-scale"), &options.time_scale) || options.time_scale <= 0)) {
    return Usage("--time-scale must be a positive number");
  }
  if (a.flags.count("slurm-partition")) options.slurm_partition = a.flags.at("slurm-partition");
  if (a.flags.count("slurm-spot-partition")) {
    options.slurm_spot_partition = a.flags.at("slurm-spot-partition");
  }
  if (a.flags.count("max-cost")) {
    double v = 0;
    if (!absl::SimpleAtod(a.flags.at("max-cost"), &v) || !(v > 0)) {
      return Usage("--max-cost must be a positive amount");
    }
    options.max_cost = v;
  }
  if (a.flags.count("max-wall-time")) {
    auto v = ParseDurationSeconds(a.flags.at("max-wall-time"));
    if (!v.ok() || *v <= 0) return Usage("--max-wall-time: invalid duration (e.g. 90s, 2h)");
    options.max_wall_time_seconds = *v;
  }
  for (const char* name : {"lease-timeout", "heartbeat"}) {
    if (!a.flags.count(name)) continue;
    auto v = ParseDurationSeconds(a.flags.at(name));
    if (!v.ok() || *v <= 0) return Usage(absl::StrCat("--", name, ": invalid duration"));
    (std::string(name) == "lease-timeout" ? options.lease_seconds : options.heartbeat_seconds) = *v;
  }
  options.tty = isatty(STDOUT_FILENO);
  auto launcher = NewPosixProcessLauncher();
  InstallStopHandlers();
  return RunExperiment(options, RunEnv{RealClockInstance(), launcher.get(), &std::cout, &std::cerr});
}

// sextant certs init DIR [--san HOST,...] |
// sextant certs issue DIR NAME [--role R] [--region REG] [--san HOST,...] [--enroll]
int Certs(int argc, char** argv) {
  constexpr const char* kCertsUsage =
      "certs takes: init DIR [--san HOST,...] | issue DIR NAME [--role worker|client|aggregator|"
      "admin] [--region REGION] [--san HOST,...] [--enroll]";
  std::vector<std::string> args;
  IssueOptions issue;
  bool role_given = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--enroll") {
      issue.enroll = true;
    } else if (arg == "--role" || arg == "--region" || arg == "--san") {
      if (i + 1 >= argc) return Usage(absl::StrCat(arg, " needs a value"));
      const std::string value = argv[++i];
      if (arg == "--region") {
        issue.region = value;
      } else if (arg == "--san") {
        for (absl::string_view san : absl::StrSplit(value, ',', absl::SkipWhitespace())) {
          issue.sans.emplace_back(absl::StripAsciiWhitespace(san));
        }
      } else {
        std::optional<Role> role = ParseRole(value);
        if (!role) return Usage(absl::StrCat("--role '", value, "': not worker, client, aggregator or admin"));
        issue.role = *role;
        role_given = true;
      }
    } else if (absl::StartsWith(arg, "--")) {
      return Usage(absl::StrCat("certs: unknown flag ", arg));
    } else {
      args.push_back(arg);
    }
  }
  absl::Status s;
  if (args.size() == 2 && args[0] == "init" && !role_given && issue.region.empty() &&
      !issue.enroll) {
    s = InitCertificateDirectory(args[1], issue.sans);
  } else if (args.size() == 3 && args[0] == "issue") {
    s = IssueIntoDirectory(args[1], args[2], issue);
  } else {
    return Usage(kCertsUsage);
  }
  if (!s.ok()) {
    std::cerr << "sextant: certs: " << s.message() << "\n";
    return s.code() == absl::StatusCode::kAlreadyExists ||
                   s.code() == absl::StatusCode::kInvalidArgument
               ? 2
               : 1;
  }
  if (args[0] == "init") {
    std::cout << "sextant: wrote a private CA, certificates and tokens in " << args[1] << "\n";
  } else {
    std::cout << "sextant: wrote certificate " << args[2] << " ("
              << IdentityUri(PeerIdentity{issue.role, issue.region, args[2]}) << ") in "
              << args[1] << "\n";
  }
  return 0;
}

int Results(const Args& a) {
  if (a.positional.empty()) return Usage("results needs a DIR");
  std::string format = a.flags.count("format") ? a.flags.at("format") : "table";
  if (format != "table" && format != "json" && format != "csv") {
    return Usage("--format must be table, json or csv");
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

int ShowStatus(const std::string& dir) {
  auto r = LoadResults(dir);
  if (!r.ok()) {
    std::cerr << "sextant: " << r.status().message() << "\n";
    return r.status().code() == absl::StatusCode::kNotFound ? 2 : 1;
  }
  std::cout << ResultsToTable(*r, 5);
  auto store = Store::Open(RunDir::DbPath(dir), false, true);
  if (store.ok()) {
    auto telemetry = (*store)->LoadTelemetry(/*latest_only=*/true);
    if (telemetry.ok()) std::cout << TelemetryTable(*telemetry, absl::ToUnixMicros(absl::Now()) / 1e6);
    auto events = (*store)->LoadEvents(0, 0);
    if (events.ok()) {
      size_t from = events->size() > 5 ? events->size() - 5 : 0;
      if (from < events->size()) std::cout << "recent events:\n";
      for (size_t i = from; i < events->size(); ++i) {
        const EventRow& e = (*events)[i];
        std::cout << "  " << absl::FormatTime("%H:%M:%S", absl::FromUnixMicros(e.time * 1e6),
                                              absl::LocalTimeZone())
                  << " " << e.kind << (e.trial_id ? absl::StrCat(" trial ", e.trial_id) : "")
                  << ": " << e.message << "\n";
      }
    }
  }
  return 0;
}

int Status(const Args& a) {
  if (a.positional.empty()) return Usage("status needs a DIR");
  if (!a.flags.count("watch")) return ShowStatus(a.positional);
  while (true) {
    if (isatty(STDOUT_FILENO)) std::cout << "\033[H\033[2J";
    int rc = ShowStatus(a.positional);
    if (rc != 0) return rc;
    auto r = LoadResults(a.positional);
    if (!r.ok() || (*r)["state"] != "RUNNING") return 0;
    std::cout << std::flush;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

int Events(const Args& a) {
  if (a.positional.empty()) return Usage("events needs a DIR");
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

int Report(const Args& a) {
  if (a.positional.empty()) return Usage("report needs a DIR");
  if (!a.flags.count("output") || a.flags.at("output").empty()) {
    return Usage("report needs -o FILE.html");
  }
  const std::string& out = a.flags.at("output");
  auto r = WriteReport(a.positional, out, absl::Now());
  if (!r.ok()) {
    std::cerr << "sextant: " << r.status().message() << "\n";
    return r.status().code() == absl::StatusCode::kNotFound ? 2 : 1;
  }
  std::cout << "sextant: wrote " << out << " (" << r->trials << " trials, " << (r->bytes + 1023) / 1024
            << " KiB)\n";
  if (r->in_progress) {
    std::cerr << "sextant: the run is still in progress; the report shows it so far\n";
  }
  if (!r->any_completed) std::cerr << "sextant: no trial has completed yet\n";
  return 0;
}

}  // namespace
}  // namespace sextant

int main(int argc, char** argv) {
  using namespace sextant;
  if (argc < 2) return Usage("");
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (cmd == "certs") return Certs(argc, argv);
  Args a;
  if (cmd == "run" || cmd == "resume") {
    a = ParseArgs(argc, argv, 2,
                  {"run-dir", "workers", "listen", "lease-timeout", "heartbeat", "metrics-port",
                   "time-scale", "slurm-partition", "slurm-spot-partition", "tls-dir",
                   "max-cost", "max-wall-time"},
                  {});
  } else if (cmd == "results") {
    a = ParseArgs(argc, argv, 2, {"format"}, {});
  } else if (cmd == "status") {
    a = ParseArgs(argc, argv, 2, {}, {"watch"});
  } else if (cmd == "simulate") {
    a = ParseArgs(argc, argv, 2, {"run-dir"}, {});
  } else if (cmd == "report") {
    // -o FILE is the one short option; it means --output FILE.
    std::vector<char*> args(argv, argv + argc);
    std::string output_flag = "--output";
    for (char*& arg : args) {
      if (std::string(arg) == "-o") arg = output_flag.data();
    }
    a = ParseArgs(argc, args.data(), 2, {"output"}, {});
  } else if (cmd == "validate" || cmd == "events") {
    a = ParseArgs(argc, argv, 2, {}, {});
  } else {
    return Usage("unknown command '" + cmd + "'");
  }
  if (!a.error.empty()) return Usage(a.error);
  if (cmd == "run") return Run(a, false);
  if (cmd == "resume") return Run(a, true);
  if (cmd == "simulate") {
    if (a.positional.empty()) return Usage("simulate needs a FILE");
    return RunSimulateCommand(a.positional, a.flags.count("run-dir") ? a.flags.at("run-dir") : "",
                              std::cout, std::cerr);
  }
  if (cmd == "validate") return Validate(a);
  if (cmd == "results") return Results(a);
  if (cmd == "status") return Status(a);
  if (cmd == "report") return Report(a);
  return Events(a);
}
