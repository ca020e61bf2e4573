#include "common/mapped_floats.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sextant {

void ReleasePages(void* data, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

bool GiveFreedMemoryBackPromptly() {
  constexpr int kSeparateBlockBytes = 128 * 1024;
  bool ok = ::mallopt(M_MMAP_THRESHOLD, kSeparateBlockBytes) == 1;
  ok = ::mallopt(M_TRIM_THRESHOLD, kSeparateBlockBytes) == 1 && ok;
  ok = ::mallopt(M_ARENA_MAX, 2) == 1 && ok;
  return ok;
}

absl::StatusOr<MappedFloats> MappedFloats::Create(const std::string& path, size_t n) {
  if (n == 0) return absl::InvalidArgumentError("a mapped array needs at least one value");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  const off_t bytes = static_cast<off_t>(n * sizeof(float));
  if (::ftruncate(fd, bytes) != 0) {
    const int e = errno;
    ::close(fd);
    ::unlink(path.c_str());
    return absl::InternalError(absl::StrCat(path, ": cannot size to ", bytes, " bytes: ",
                                            std::strerror(e)));
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);  // the mapping keeps the file open
  if (p == MAP_FAILED) {
    ::unlink(path.c_str());
    return absl::InternalError(absl::StrCat(path, ": cannot map: ", std::strerror(e)));
  }
  return MappedFloats(path, static_cast<float*>(p), n);
}

MappedFloats::MappedFloats(MappedFloats&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFloats& MappedFloats::operator=(MappedFloats&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

MappedFloats::~MappedFloats() { Close(); }

void MappedFloats::Close() {
  if (data_ == nullptr) return;
  ::munmap(data_, size_ * sizeof(float));
  ::unlink(path_.c_str());
  data_ = nullptr;
  size_ = 0;
}

void MappedFloats::Release(size_t offset, size_t count) {
  if (offset >= size_) return;
  count = std::min(count, size_ - offset);
  // A shared file mapping's dirty pages stay in the page cache: dropping them loses nothing.
  ReleasePages(data_ + offset, count * sizeof(float));
}

LazyFloats::LazyFloats(size_t n) {
  if (n == 0) return;
  void* p = ::mmap(nullptr, n * sizeof(float), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  data_ = static_cast<float*>(p);
  size_ = n;
}

LazyFloats::LazyFloats(LazyFloats&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

LazyFloats& LazyFloats::operator=(LazyFloats&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_ * sizeof(float));
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

LazyFloats::~LazyFloats() {
  if (data_ != nullptr) ::munmap(data_, size_ * sizeof(float));
}

}  // namespace sextant
