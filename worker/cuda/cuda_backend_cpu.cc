// The stand-in for builds without nvcc: there is no CUDA device to use.
#include "worker/cuda/cuda_backend.h"

namespace sextant::cuda {

int DeviceCount() { return 0; }

absl::StatusOr<std::unique_ptr<train::Backend>> NewCudaBackend(const CudaBackendOptions&) {
  return absl::UnavailableError(
      "this build has no CUDA backend (nvcc was not found at configure time)");
}

absl::StatusOr<std::unique_ptr<GradientAllReduce>> NewGradientAllReduce(
    const std::vector<train::Backend*>&) {
  return absl::UnavailableError("this build has no CUDA backend");
}

}  // namespace sextant::cuda
