#include "orchestrator/core/run_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace sextant {

absl::StatusOr<RunDir> RunDir::Acquire(const std::string& path) {
  std::error_code ec;
  for (const char* sub : {"", "/logs", "/artifacts/checkpoints"}) {
    std::filesystem::create_directories(path + sub, ec);
    if (ec) {
      return absl::InternalError(absl::StrCat(path, sub, ": cannot create: ", ec.message()));
    }
  }
  std::string lock_path = path + "/lock";
  int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError(absl::StrCat(lock_path, ": ", strerror(errno)));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {0};
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    std::string holder = n > 0 ? std::string(buf, n) : "unknown";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    return absl::FailedPreconditionError(
        absl::StrCat("run directory ", path, " is in use by another sextant process (pid ", holder,
                     "); there is exactly one writer per run directory"));
  }
  std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock itself is what matters; the pid is only a hint for the message above.
  }
  return RunDir(path, fd);
}

RunDir::RunDir(RunDir&& other) noexcept : path_(std::move(other.path_)), lock_fd_(other.lock_fd_) {
  other.lock_fd_ = -1;
}

RunDir::~RunDir() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

}  // namespace sextant
