// Memory that the process gives back between passes over it, for models too large to hold
// twice: a float array in a file mapped MAP_SHARED (its values live in the file and the page
// cache, and only the pages touched since the last Release count in the process's resident
// memory), and ReleasePages for anonymous memory whose contents may be dropped.
#ifndef SEXTANT_COMMON_MAPPED_FLOATS_H_
#define SEXTANT_COMMON_MAPPED_FLOATS_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sextant {

// Drops the whole pages inside [data, data + bytes) from the process (madvise MADV_DONTNEED).
// Anonymous private memory reads back as zeros afterwards: only for memory whose contents are
// no longer needed. The partial pages at either end are left as they are.
void ReleasePages(void* data, size_t bytes);

// Makes the process's allocator give freed memory back to the system promptly: blocks of
// 128 KiB or more are mapped on their own and unmapped when freed (glibc otherwise raises that
// threshold to the largest block freed, so a large model's message buffers stay in the heap),
// the heap is trimmed above 128 KiB free, and threads share at most 2 arenas. Called once at
// the start of each binary's main, before any thread starts. Returns false when the allocator
// refused a setting (the process runs on with its defaults).
bool GiveFreedMemoryBackPromptly();

// A float array of fixed length in a file. Move-only; the mapping and the file go with it.
class MappedFloats {
 public:
  // Creates (or truncates) `path` to n floats of zeros and maps it read-write. InvalidArgument
  // for n == 0; Internal with the system's reason when the file cannot be made or mapped.
  static absl::StatusOr<MappedFloats> Create(const std::string& path, size_t n);
  MappedFloats(MappedFloats&& other) noexcept;
  MappedFloats& operator=(MappedFloats&& other) noexcept;
  MappedFloats(const MappedFloats&) = delete;
  MappedFloats& operator=(const MappedFloats&) = delete;
  ~MappedFloats();  // unmaps and removes the file

  absl::Span<float> span() { return {data_, size_}; }
  absl::Span<const float> span() const { return {data_, size_}; }
  size_t size() const { return size_; }
  // Gives back the resident pages of values [offset, offset + count) (clamped to the array):
  // their values stay in the file, and reading them faults them back in.
  void Release(size_t offset, size_t count);
  void Release() { Release(0, size_); }

 private:
  MappedFloats(std::string path, float* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void Close();

  std::string path_;
  float* data_ = nullptr;
  size_t size_ = 0;
};

// A float array of fixed length in anonymous memory that is resident only where written: it
// starts as zeros with no page resident (unlike a std::vector, which writes its zeros), and
// Release gives its pages back between uses. Move-only.
class LazyFloats {
 public:
  LazyFloats() = default;  // 0 floats
  // n zeros, none resident. A failed mapping leaves 0 floats (check size()).
  explicit LazyFloats(size_t n);
  LazyFloats(LazyFloats&& other) noexcept;
  LazyFloats& operator=(LazyFloats&& other) noexcept;
  LazyFloats(const LazyFloats&) = delete;
  LazyFloats& operator=(const LazyFloats&) = delete;
  ~LazyFloats();

  absl::Span<float> span() { return {data_, size_}; }
  size_t size() const { return size_; }
  // Gives every page back: the values read as 0 afterwards.
  void Release() { ReleasePages(data_, size_ * sizeof(float)); }

 private:
  float* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_COMMON_MAPPED_FLOATS_H_
