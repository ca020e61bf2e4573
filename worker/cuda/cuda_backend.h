// The CUDA backend of the built-in trainer: buffers in device memory, GEMMs in cuBLAS (FP32, no
// TF32, so results track the CPU backend), and our own kernels (kernels.cu) for bias,
// activation, dropout, softmax cross-entropy, convolution helpers and the optimiser steps.
// Multi-GPU data parallelism all-reduces gradients with NCCL.
// In a build without CUDA every factory here returns Unavailable.
#ifndef SEXTANT_WORKER_CUDA_CUDA_BACKEND_H_
#define SEXTANT_WORKER_CUDA_CUDA_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/train/backend.h"

namespace sextant::cuda {

struct CudaBackendOptions {
  int device = 0;                  // CUDA device index (after CUDA_VISIBLE_DEVICES); default 0
  int64_t memory_limit_bytes = 0;  // fail allocations beyond this total, as a real OOM; 0: none
};

// The number of usable CUDA devices: 0 without CUDA, a driver or a device.
int DeviceCount();

// A backend on one device. Unavailable (with the reason) when the device cannot be used.
// Allocation failures (cudaErrorMemoryAllocation) come back as ResourceExhausted, so the
// trainer's OOM recovery halves the micro-batch. Kernel and library errors are sticky: the
// first one is returned by Synchronize().
absl::StatusOr<std::unique_ptr<train::Backend>> NewCudaBackend(const CudaBackendOptions& options);

// Sums gradients across data-parallel replicas with NCCL (one communicator per device, all in
// this process): the trainer scales each replica's gradient by 1/batch, so the sum is the
// gradient of the whole batch. Not thread-safe; driven by the training loop.
class GradientAllReduce {
 public:
  virtual ~GradientAllReduce() = default;
  // per_replica[r] lists replica r's gradient tensors, in the same order and shapes for every
  // replica, each on replica r's device. On return every replica holds the sum. One replica
  // returns at once. InvalidArgument on mismatched shapes; Internal on NCCL errors.
  virtual absl::Status SumInPlace(const std::vector<std::vector<train::Tensor>>& per_replica) = 0;
};

// replicas[r] must be CUDA backends made by NewCudaBackend on distinct devices.
absl::StatusOr<std::unique_ptr<GradientAllReduce>> NewGradientAllReduce(
    const std::vector<train::Backend*>& replicas);

}  // namespace sextant::cuda

#endif  // SEXTANT_WORKER_CUDA_CUDA_BACKEND_H_
