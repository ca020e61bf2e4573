#include <cuda_runtime.h>

#include "worker/cuda/device_query.h"

namespace sextant {

std::vector<GpuInfo> QueryGpus() {
  std::vector<GpuInfo> gpus;
  int n = 0;
  // No driver or no device is normal on a CPU machine: report none.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return gpus;
  }
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    gpus.push_back(GpuInfo{i, prop.name, prop.totalGlobalMem});
  }
  return gpus;
}

bool BuiltWithCuda() { return true; }

}  // namespace sextant
