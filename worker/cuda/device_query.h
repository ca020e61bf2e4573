#ifndef SEXTANT_WORKER_CUDA_DEVICE_QUERY_H_
#define SEXTANT_WORKER_CUDA_DEVICE_QUERY_H_

#include <string>
#include <vector>

namespace sextant {

struct GpuInfo {
  int index = 0;
  std::string name;
  size_t total_memory_bytes = 0;
};

// Lists the CUDA devices. Returns an empty list when the binary was built without CUDA, when
// no driver is loaded, or when there is no device; never fails.
std::vector<GpuInfo> QueryGpus();

// True when this binary has the CUDA backend compiled in.
bool BuiltWithCuda();

}  // namespace sextant

#endif  // SEXTANT_WORKER_CUDA_DEVICE_QUERY_H_
