#include "orchestrator/fleet/local_provider.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/proc_file.h"

namespace sextant {
namespace {

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return "ended";
}

}  // namespace

LocalProvider::LocalProvider(ProcessLauncher* launcher, std::string worker_binary)
    : launcher_(launcher), worker_binary_(std::move(worker_binary)) {}

absl::StatusOr<std::string> LocalProvider::Launch(const InstanceRequest& request) {
  std::vector<std::string> argv = request.command;
  if (argv.empty()) {
    argv = {worker_binary_,        "--connect",         request.connect, "--region",
            request.region,        "--pool",            request.pool,    "--launch-token",
            request.launch_token,  "--exit-with-parent"};
    if (request.preempt_notice_seconds > 0) {
      argv.push_back("--preempt-notice");
      argv.push_back(absl::StrCat(request.preempt_notice_seconds));
    }
    request.credentials.AppendFlags(&argv);
  }
  absl::StatusOr<pid_t> pid = launcher_->Launch(argv, request.log_path);
  if (!pid.ok()) return pid.status();
  live_[*pid] = true;
  return absl::StrCat(*pid);
}

absl::Status LocalProvider::Terminate(const std::string& handle) {
  pid_t pid = 0;
  if (!absl::SimpleAtoi(handle, &pid) || !live_.count(pid)) return absl::OkStatus();
  launcher_->Signal(pid, SIGINT);
  return absl::OkStatus();
}

InstanceStatus LocalProvider::Poll(const std::string& handle) {
  pid_t pid = 0;
  if (!absl::SimpleAtoi(handle, &pid)) return InstanceStatus::Gone("not a local instance");
  auto done = exited_.find(pid);
  if (done != exited_.end()) return InstanceStatus::Gone(done->second);
  if (!live_.count(pid)) return InstanceStatus::Gone("unknown instance");
  std::optional<int> status = launcher_->Poll(pid);
  if (!status) return InstanceStatus::Running();
  live_.erase(pid);
  return InstanceStatus::Gone(exited_[pid] = DescribeExit(*status));
}

namespace {

// The process groups led by pid's children: a worker runs each trial as its own group.
std::vector<pid_t> ChildGroups(pid_t pid) {
  std::vector<pid_t> out;
  DIR* dir = ::opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* d = ::readdir(dir)) {
    pid_t child = 0;
    if (!absl::SimpleAtoi(d->d_name, &child)) continue;
    const std::string text = ReadProcFile(absl::StrCat("/proc/", child, "/stat"));
    size_t paren = text.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(text.substr(paren + 2));
    std::string state;
    pid_t ppid = 0, pgrp = 0;
    if (rest >> state >> ppid >> pgrp && ppid == pid && pgrp == child) out.push_back(child);
  }
  ::closedir(dir);
  return out;
}

}  // namespace

absl::Status LocalProvider::Interrupt(const std::string& handle, bool notice) {
  pid_t pid = 0;
  if (!absl::SimpleAtoi(handle, &pid) || !live_.count(pid)) return absl::OkStatus();
  if (!notice) {
    // The instance is taken back: whatever runs on it dies with it, trials included (they run
    // in their own process groups, which would otherwise outlive the worker).
    for (pid_t group : ChildGroups(pid)) ::killpg(group, SIGKILL);
  }
  launcher_->Signal(pid, notice ? SIGTERM : SIGKILL);
  return absl::OkStatus();
}

void LocalProvider::KillAll() {
  for (const auto& [pid, unused] : live_) launcher_->Signal(pid, SIGKILL);
}

}  // namespace sextant
