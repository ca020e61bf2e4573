// Writing a file whole or not at all: the one write-temp-then-rename of the project.
#ifndef SEXTANT_COMMON_ATOMIC_FILE_H_
#define SEXTANT_COMMON_ATOMIC_FILE_H_

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sextant {

struct AtomicWriteOptions {
  // The file's mode, less the process's umask (0600 under Sextant's 077). Default 0644.
  mode_t mode = 0644;
  // fsync the file before the rename and its directory after, so that the new contents survive
  // a crash of the machine. Off only for scratch files no restart reads. Default on.
  bool sync = true;
};

// Writes `path` through a temporary file beside it: `body(fd, tmp_path)` writes the contents to
// fd (WriteAllToFd), then the file is renamed over `path`. A reader sees the old file or the new
// one, never a part. The temporary is made anew (O_EXCL, O_NOFOLLOW: never through a link an
// attacker planted) and removed on any failure, leaving `path` as it was. Errors name the path,
// under the code errno maps to (PermissionDenied, ResourceExhausted for a full disk, ...), or
// body's own error.
absl::Status WriteFileAtomically(const std::string& path,
                                 const std::function<absl::Status(int fd, const std::string& tmp)>& body,
                                 AtomicWriteOptions options = {});
// The same with the whole contents at hand.
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents,
                                 AtomicWriteOptions options = {});

// Writes all of data to fd, through short writes and EINTR; the error names path.
absl::Status WriteAllToFd(int fd, absl::string_view data, const std::string& path);

}  // namespace sextant

#endif  // SEXTANT_COMMON_ATOMIC_FILE_H_
