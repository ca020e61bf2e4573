#include "orchestrator/core/run_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

constexpr const char* kFolders[] = {"", "/logs", "/artifacts", "/artifacts/checkpoints"};

absl::Status LinkError(const std::string& entry) {
  return absl::InvalidArgumentError(absl::StrCat(
      entry,
      " is a symbolic link; a run directory holds its own files, and Sextant writes through no "
      "link (remove it, or copy the file it points to in its place)"));
}

// Walks the whole directory without following links. A trial's own checkpoint folder is the
// exception: what the trial keeps there (a `latest` link, say) is its own business, and the
// worker writes nothing into it.
absl::Status RefuseLinks(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path checkpoints = fs::path(path) / "artifacts" / "checkpoints";
  fs::recursive_directory_iterator it(path, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it->is_symlink(ec)) return LinkError(it->path().string());
    if (it->path().parent_path() == checkpoints) it.disable_recursion_pending();
  }
  return absl::OkStatus();  // a directory that does not exist yet holds no link
}

absl::Status MakePrivateFolders(const std::string& path) {
  std::error_code ec;
  for (const char* sub : kFolders) {
    const std::string dir = path + sub;
    std::filesystem::create_directories(dir, ec);
    if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot create: ", ec.message()));
    // Also a run directory made before this rule held, or by hand with the default umask.
    if (::chmod(dir.c_str(), 0700) != 0) {
      return absl::InternalError(
          absl::StrCat(dir, ": cannot make it private (mode 0700): ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RunDir> RunDir::Acquire(const std::string& path) {
  if (absl::Status s = RefuseLinks(path); !s.ok()) return s;
  if (absl::Status s = MakePrivateFolders(path); !s.ok()) return s;
  std::string lock_path = path + "/lock";
  // O_NOFOLLOW: a link put in place after the check above is refused all the same.
  int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ELOOP) return LinkError(lock_path);
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
