// What a worker's heartbeat reports about the trial it runs: CPU and resident memory of the
// trial's process group, and, where NVIDIA's driver is installed, GPU utilisation and memory
// read through NVML (libnvidia-ml.so.1, loaded at run time so that no build depends on it).
#ifndef SEXTANT_WORKER_TELEMETRY_H_
#define SEXTANT_WORKER_TELEMETRY_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace sextant {

struct ProcessSample {
  double cpu_percent = 0;  // of one core, summed over the group, since the previous sample
  int64_t rss_bytes = 0;   // summed over the group
  int processes = 0;       // live members found (exited ones not yet reaped are not counted)
};

// Samples the processes whose process group is `pgid` from /proc.
// Not thread-safe; one per running command.
class ProcessGroupSampler {
 public:
  explicit ProcessGroupSampler(pid_t pgid);
  // CPU use is measured between consecutive calls at times `now` (the first call reports 0%).
  ProcessSample Sample(absl::Time now);

 private:
  pid_t pgid_;
  double last_cpu_seconds_ = -1;
  absl::Time last_time_;
};

struct GpuSample {
  int count = 0;                   // GPUs sampled
  double utilization_percent = 0;  // mean over them
  int64_t memory_used_bytes = 0;   // summed
  int64_t memory_total_bytes = 0;  // summed
};

// NVML through dlopen. Thread-compatible.
class GpuMonitor {
 public:
  // Loads libnvidia-ml.so.1 and initialises NVML. Unavailable (with the reason) when the
  // library is absent or no device is visible; callers then report CPU telemetry only.
  static absl::StatusOr<std::unique_ptr<GpuMonitor>> Open();
  ~GpuMonitor();
  int device_count() const { return count_; }
  // Samples the devices with these indices (all when empty). Devices that fail to answer are
  // skipped.
  GpuSample Sample(const std::vector<int>& indices) const;

 private:
  struct Api;
  GpuMonitor(void* lib, std::unique_ptr<Api> api, int count);
  void* lib_;
  std::unique_ptr<Api> api_;
  int count_;
};

// Parses a device list such as "0,1,3" (what CUDA_VISIBLE_DEVICES takes). InvalidArgument on
// anything but non-negative integers separated by commas; empty text gives an empty list.
absl::StatusOr<std::vector<int>> ParseDeviceList(const std::string& text);

}  // namespace sextant

#endif  // SEXTANT_WORKER_TELEMETRY_H_
