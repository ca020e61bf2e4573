#include "common/atomic_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

// "PATH: what" under the code the current errno maps to (read before the message is built).
absl::Status Errno(const std::string& path, absl::string_view what) {
  const int err = errno;
  return absl::ErrnoToStatus(err, absl::StrCat(path, ": ", what));
}

absl::Status FsyncDirectoryOf(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(dir, "cannot open the directory to fsync it");
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // EINVAL: a filesystem that cannot fsync a directory; the rename is done either way.
  if (rc != 0 && err != EINVAL) {
    errno = err;
    return Errno(dir, "cannot fsync the directory");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteAllToFd(int fd, absl::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno(path, "cannot write");
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path,
                                 const std::function<absl::Status(int, const std::string&)>& body,
                                 AtomicWriteOptions options) {
  std::string tmp = path + ".tmp-XXXXXX";
  // mkostemp finds a free name; its file is 0600 whatever the umask, so the file is made anew
  // with the mode asked for (O_EXCL: nothing may take the name in between).
  const int reserved = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (reserved < 0) return Errno(path, "cannot create a temporary file beside it");
  ::close(reserved);
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        options.mode);
  if (fd < 0) return Errno(tmp, "cannot create");
  absl::Status s = body(fd, tmp);
  if (s.ok() && options.sync && ::fsync(fd) != 0) s = Errno(tmp, "cannot fsync");
  if (::close(fd) != 0 && s.ok()) s = Errno(tmp, "cannot close");
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = Errno(path, "cannot rename the temporary file into place");
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return options.sync ? FsyncDirectoryOf(path) : absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 AtomicWriteOptions options) {
  return WriteFileAtomically(
      path, [&](int fd, const std::string& tmp) { return WriteAllToFd(fd, contents, tmp); },
      options);
}

}  // namespace sextant
