#include "orchestrator/core/local_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace sextant {
namespace {

class PosixProcessLauncher : public ProcessLauncher {
 public:
  absl::StatusOr<pid_t> Launch(const std::vector<std::string>& argv,
                               const std::string& log_path) override {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    // Never through a link: posix_spawn then fails with ELOOP.
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Each child in a process group of its own: a terminal's Ctrl-C reaches the orchestrator
    // alone, which stops its children itself, in order (an evaluator that died of the same
    // SIGINT first would read as a failure). PR_SET_PDEATHSIG still ends them with it.
    posix_spawnattr_setpgroup(&attr, 0);
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(
        &attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = 0;
    int rc = posix_spawn(&pid, args[0], &actions, &attr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0)
      return absl::InternalError(absl::StrCat("cannot start ", argv[0], ": ", strerror(rc)));
    return pid;
  }

  void Signal(pid_t pid, int sig) override { kill(pid, sig); }

  std::optional<int> Poll(pid_t pid) override {
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid, &status, WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == pid) return status;
    if (r < 0) return 0;  // not our child any more: treat as gone
    return std::nullopt;
  }
};

}  // namespace

std::unique_ptr<ProcessLauncher> NewPosixProcessLauncher() {
  return std::make_unique<PosixProcessLauncher>();
}

std::string BinaryBesideThisOne(const std::string& name) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::string(".") : self.parent_path().string()) + "/" + name;
}

}  // namespace sextant
