// Somewhere to put data that arrives in pieces before it is used whole: in memory, or in an
// unlinked file, for data too large to hold beside what it will be folded into (a file's pages
// sit in the page cache, which the system may write out, not in the process's memory).
#ifndef SEXTANT_COMMON_STAGING_BUFFER_H_
#define SEXTANT_COMMON_STAGING_BUFFER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sextant {

// A byte array of fixed length. Move-only; the file (when there is one) goes with it.
// Not thread-safe.
class StagingBuffer {
 public:
  // `bytes` bytes: in memory when dir is empty, else in a file in dir that no other process can
  // name (unlinked at once). Unavailable with the system's reason when no file can be made.
  static absl::StatusOr<StagingBuffer> Create(const std::string& dir, size_t bytes);
  StagingBuffer() = default;  // 0 bytes, in memory
  StagingBuffer(StagingBuffer&& other) noexcept;
  StagingBuffer& operator=(StagingBuffer&& other) noexcept;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;
  ~StagingBuffer();

  // Stores data at [offset, offset + data.size()). OutOfRange past the end; Unavailable with the
  // system's reason when the file cannot be written (a full disk).
  absl::Status Write(size_t offset, absl::Span<const char> data);
  // Fills out from [offset, offset + out.size()); bytes never written read as 0. OutOfRange past
  // the end; DataLoss with the system's reason when the file cannot be read.
  absl::Status Read(size_t offset, absl::Span<char> out) const;
  size_t size() const { return size_; }
  bool in_file() const { return fd_ >= 0; }

 private:
  StagingBuffer(int fd, size_t size) : fd_(fd), size_(size) {}
  absl::Status CheckRange(size_t offset, size_t count) const;

  int fd_ = -1;
  size_t size_ = 0;
  std::vector<char> memory_;  // when fd_ < 0
};

}  // namespace sextant

#endif  // SEXTANT_COMMON_STAGING_BUFFER_H_
