#include "common/staging_buffer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

// An unlinked file in dir: O_TMPFILE where the file system has it, else a named file removed
// at once. -1 with errno set on failure.
int OpenUnlinked(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)) return fd;
  std::string name = dir + "/.staging-XXXXXX";
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd >= 0) ::unlink(name.c_str());
  return fd;
}

}  // namespace

absl::StatusOr<StagingBuffer> StagingBuffer::Create(const std::string& dir, size_t bytes) {
  if (dir.empty()) {
    StagingBuffer b(-1, bytes);
    b.memory_.resize(bytes);
    return b;
  }
  const int fd = OpenUnlinked(dir);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot make a staging file in ", dir, ": ", std::strerror(errno)));
  }
  return StagingBuffer(fd, bytes);
}

StagingBuffer::StagingBuffer(StagingBuffer&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      size_(std::exchange(other.size_, 0)),
      memory_(std::move(other.memory_)) {}

StagingBuffer& StagingBuffer::operator=(StagingBuffer&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
    memory_ = std::move(other.memory_);
  }
  return *this;
}

StagingBuffer::~StagingBuffer() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status StagingBuffer::CheckRange(size_t offset, size_t count) const {
  if (offset > size_ || count > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("staging: bytes [", offset, ", ", offset + count,
                                              ") lie past the end at ", size_));
  }
  return absl::OkStatus();
}

absl::Status StagingBuffer::Write(size_t offset, absl::Span<const char> data) {
  if (absl::Status s = CheckRange(offset, data.size()); !s.ok()) return s;
  if (fd_ < 0) {
    std::memcpy(memory_.data() + offset, data.data(), data.size());
    return absl::OkStatus();
  }
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n =
        ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(absl::StrCat("staging: cannot write the file: ",
                                                 n < 0 ? std::strerror(errno) : "0 bytes"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status StagingBuffer::Read(size_t offset, absl::Span<char> out) const {
  if (absl::Status s = CheckRange(offset, out.size()); !s.ok()) return s;
  if (fd_ < 0) {
    std::memcpy(out.data(), memory_.data() + offset, out.size());
    return absl::OkStatus();
  }
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n =
        ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::DataLossError(
          absl::StrCat("staging: cannot read the file: ", std::strerror(errno)));
    }
    if (n == 0) {  // past what was written: a hole at the end reads as zeros
      std::memset(out.data() + done, 0, out.size() - done);
      break;
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace sextant
