#include "orchestrator/fleet/slurm_provider.h"

#include <errno.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

extern char** environ;

namespace sextant {
namespace {

// One word for `sh -c`: single-quoted, with embedded quotes closed and reopened.
std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

}  // namespace

absl::StatusOr<int> RunCommandForOutput(const std::vector<std::string>& argv, std::string* output) {
  int fds[2];
  if (pipe(fds) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat("cannot run ", argv[0], ": ", strerror(rc)));
  }
  output->clear();
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    output->append(buf, static_cast<size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string SlurmProvider::Command(const char* name) const {
  return options_.commands_dir.empty() ? name : absl::StrCat(options_.commands_dir, "/", name);
}

absl::StatusOr<std::string> SlurmProvider::Launch(const InstanceRequest& request) {
  std::vector<std::string> worker = request.command;
  if (worker.empty()) {
    worker = {options_.worker_binary, "--connect", request.connect, "--region",
              request.region,         "--pool",    request.pool,    "--launch-token",
              request.launch_token};
    if (request.preempt_notice_seconds > 0) {
      worker.push_back("--preempt-notice");
      worker.push_back(absl::StrCat(request.preempt_notice_seconds));
    }
    request.credentials.AppendFlags(&worker);
  }
  std::vector<std::string> quoted;
  for (const std::string& w : worker) quoted.push_back(ShellQuote(w));
  const bool spot = request.market == Market::kSpot;
  const std::string partition =
      spot && !options_.spot_partition.empty() ? options_.spot_partition : options_.partition;
  std::vector<std::string> argv = {
      Command("sbatch"), "--parsable", absl::StrCat("--job-name=sextant-", request.launch_token),
      absl::StrCat("--output=", request.log_path), spot ? "--requeue" : "--no-requeue"};
  if (!partition.empty()) argv.push_back(absl::StrCat("--partition=", partition));
  argv.push_back(absl::StrCat("--wrap=exec ", absl::StrJoin(quoted, " ")));
  std::string out;
  absl::StatusOr<int> rc = RunCommandForOutput(argv, &out);
  if (!rc.ok()) return rc.status();
  std::string text(absl::StripAsciiWhitespace(out));
  if (*rc != 0) {
    const std::string msg = absl::StrCat("sbatch failed (exit ", *rc, "): ", text);
    if (absl::StrContains(text, "Unable to contact") || absl::StrContains(text, "unavailable") ||
        absl::StrContains(text, "Resource") || absl::StrContains(text, "limit")) {
      return absl::UnavailableError(msg);
    }
    return absl::InternalError(msg);
  }
  // --parsable prints "jobid" or "jobid;cluster" (after any warnings, on the last line).
  std::string last = text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  std::string id = last.substr(0, last.find(';'));
  int64_t n = 0;
  if (!absl::SimpleAtoi(id, &n))
    return absl::InternalError(absl::StrCat("sbatch printed no job id: ", text));
  return id;
}

absl::Status SlurmProvider::Terminate(const std::string& handle) {
  std::string out;
  absl::StatusOr<int> rc = RunCommandForOutput({Command("scancel"), handle}, &out);
  if (!rc.ok()) return rc.status();
  if (*rc != 0 && !absl::StrContains(out, "Invalid job id") &&
      !absl::StrContains(out, "already completing")) {
    return absl::InternalError(absl::StrCat("scancel ", handle, ": ", out));
  }
  return absl::OkStatus();
}

InstanceStatus SlurmProvider::Poll(const std::string& handle) {
  std::string out;
  absl::StatusOr<int> rc =
      // -t all: a job being requeued (or just ended) is listed too, not taken for gone.
      RunCommandForOutput({Command("squeue"), "-h", "-j", handle, "-t", "all", "-o", "%T"}, &out);
  if (!rc.ok()) return InstanceStatus::Running();  // cannot tell: assume it still runs
  std::string state(absl::StripAsciiWhitespace(out));
  if (*rc != 0) {
    if (absl::StrContains(out, "Invalid job id")) return InstanceStatus::Gone("job left the queue");
    return InstanceStatus::Running();
  }
  if (state.empty()) return InstanceStatus::Gone("job left the queue");
  if (state == "PENDING" || state == "CONFIGURING" || absl::StartsWith(state, "REQUEUE"))
    return InstanceStatus::Pending();
  if (state == "RUNNING" || state == "COMPLETING" || state == "SUSPENDED")
    return InstanceStatus::Running();
  return InstanceStatus::Gone(absl::StrCat("job ", absl::AsciiStrToLower(state)));
}

absl::Status SlurmProvider::Interrupt(const std::string& handle, bool notice) {
  std::string out;
  std::vector<std::string> argv = {Command("scancel")};
  // --full: without it Slurm signals only job steps, and the worker is the batch script.
  if (notice) {
    argv.push_back("--full");
    argv.push_back("--signal=TERM");
  }
  argv.push_back(handle);
  absl::StatusOr<int> rc = RunCommandForOutput(argv, &out);
  if (!rc.ok()) return rc.status();
  return absl::OkStatus();
}

}  // namespace sextant
