#ifndef SEXTANT_WORKER_TRAIN_ACCOUNTED_BACKEND_H_
#define SEXTANT_WORKER_TRAIN_ACCOUNTED_BACKEND_H_

#include <cstdint>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "worker/train/backend.h"

namespace sextant::train {

// A Backend whose buffers are counted against an optional memory limit. The bookkeeping that
// every backend needs (Allocate, AllocateInts, Release, allocated_bytes and the limit check
// behind the trainer's OOM recovery) lives here once; a concrete backend supplies the two
// primitives over its own memory (host or device). Header-only, because the CUDA backend's
// library sits below the trainer's. Not thread-safe, like Backend.
class AccountedBackend : public Backend {
 public:
  absl::StatusOr<Buffer> Allocate(int64_t rows, int64_t cols) final {
    void* p = nullptr;
    if (auto s = Reserve(rows * cols * static_cast<int64_t>(sizeof(float)), &p); !s.ok()) return s;
    return Buffer(static_cast<float*>(p), rows, cols, this);
  }

  absl::StatusOr<IntBuffer> AllocateInts(int64_t n) final {
    void* p = nullptr;
    if (auto s = Reserve(n * static_cast<int64_t>(sizeof(int32_t)), &p); !s.ok()) return s;
    return IntBuffer(static_cast<int32_t*>(p), n, this);
  }

  void Release(void* p) final {
    auto it = live_.find(p);
    if (it == live_.end()) return;
    allocated_ -= it->second;
    live_.erase(it);
    RawFree(p);
  }

  int64_t allocated_bytes() const final { return allocated_; }

 protected:
  // memory_limit_bytes: 0 = no limit beyond what RawAllocate can get.
  explicit AccountedBackend(int64_t memory_limit_bytes) : limit_(memory_limit_bytes) {}

  // `bytes` (>= 0) of zero-filled memory, or ResourceExhausted naming the size.
  virtual absl::StatusOr<void*> RawAllocate(int64_t bytes) = 0;
  virtual void RawFree(void* p) = 0;

  // Frees every live buffer. A subclass calls it from its destructor, while RawFree still works.
  void ReleaseAll() {
    for (auto& [p, bytes] : live_) RawFree(p);
    live_.clear();
    allocated_ = 0;
  }

 private:
  absl::Status Reserve(int64_t bytes, void** out) {
    if (bytes < 0) return absl::InvalidArgumentError("negative allocation size");
    if (limit_ > 0 && allocated_ + bytes > limit_) {
      return absl::ResourceExhaustedError(absl::StrCat(name(), ": allocating ", bytes,
                                                       " bytes would exceed the memory limit of ",
                                                       limit_, " bytes (", allocated_, " in use)"));
    }
    absl::StatusOr<void*> p = RawAllocate(bytes);
    if (!p.ok()) return p.status();
    live_[*p] = bytes;
    allocated_ += bytes;
    *out = *p;
    return absl::OkStatus();
  }

  const int64_t limit_;
  int64_t allocated_ = 0;
  std::unordered_map<void*, int64_t> live_;
};

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_ACCOUNTED_BACKEND_H_
