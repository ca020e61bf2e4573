// The CPU backend: Eigen GEMMs (vectorised for the CPU found at run time) and OpenMP loops.
#ifndef SEXTANT_WORKER_TRAIN_CPU_BACKEND_H_
#define SEXTANT_WORKER_TRAIN_CPU_BACKEND_H_

#include <cstdint>
#include <memory>

#include "worker/train/backend.h"

namespace sextant::train {

struct CpuBackendOptions {
  // Worker threads for GEMMs and element-wise loops. Default 2. Results are bit-identical for a
  // given thread count; GEMM summation order may differ between thread counts.
  int threads = 2;
  // Allocations beyond this many bytes in total fail with ResourceExhausted, as a GPU out of
  // memory would. Default 0: no limit.
  int64_t memory_limit_bytes = 0;
};

// On a machine shared with other busy processes, run with OMP_WAIT_POLICY=passive (the trainer's
// command line sets it): spinning OpenMP threads that lose their core stall every parallel step.
// Returns a CPU backend. Not thread-safe (see Backend). threads < 1 is treated as 1.
std::unique_ptr<Backend> NewCpuBackend(const CpuBackendOptions& options = {});

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_CPU_BACKEND_H_
