// Single-threaded row-major SGEMM on Eigen, compiled once per instruction set (generic, AVX2+FMA,
// AVX-512) so that a portable binary uses the widest vectors the CPU has. Private to cpu_backend.
#ifndef SEXTANT_WORKER_TRAIN_INTERNAL_GEMM_KERNEL_H_
#define SEXTANT_WORKER_TRAIN_INTERNAL_GEMM_KERNEL_H_

#include <cstdint>

namespace sextant::train::internal {

// c (m x n, row stride ldc) = alpha * op(a) * op(b) + beta * c. op(a) is m x k: a is stored
// m x k (row stride lda), or k x m when ta. op(b) is k x n: b is stored k x n, or n x k when tb.
struct GemmArgs {
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float beta = 0;
  float* c = nullptr;
  int64_t ldc = 0;
};

using GemmFn = void (*)(const GemmArgs&);

void GemmGeneric(const GemmArgs& g);
void GemmAvx2(const GemmArgs& g);    // only when SEXTANT_GEMM_X86_VARIANTS; needs avx2 and fma
void GemmAvx512(const GemmArgs& g);  // only when SEXTANT_GEMM_X86_VARIANTS; needs avx512f/dq/vl/bw

// The fastest variant this CPU supports (checked at run time with cpuid).
GemmFn SelectGemm();
// The name of the variant SelectGemm() picks: "generic", "avx2" or "avx512".
const char* SelectedGemmName();

}  // namespace sextant::train::internal

#endif  // SEXTANT_WORKER_TRAIN_INTERNAL_GEMM_KERNEL_H_
