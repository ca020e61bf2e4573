// Compiled once per SEXTANT_GEMM_VARIANT (0 generic, 2 AVX2+FMA, 3 AVX-512). The vector variants
// rename Eigen's namespace so that their template instantiations, compiled for wider
// instructions, can never be merged by the linker into code that runs on older CPUs.
#ifndef SEXTANT_GEMM_VARIANT
#define SEXTANT_GEMM_VARIANT 0
#endif
#if SEXTANT_GEMM_VARIANT == 2
#define Eigen sextant_eigen_avx2
#define SEXTANT_GEMM_FN GemmAvx2
#elif SEXTANT_GEMM_VARIANT == 3
#define Eigen sextant_eigen_avx512
#define SEXTANT_GEMM_FN GemmAvx512
#else
#define SEXTANT_GEMM_FN GemmGeneric
#endif
#define EIGEN_DONT_PARALLELIZE

#include "worker/train/internal/gemm_kernel.h"
#include "Eigen/Core"

namespace sextant::train::internal {

void SEXTANT_GEMM_FN(const GemmArgs& g) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<Mat, 0, Stride> c(g.c, g.m, g.n, Stride(g.ldc));
  if (g.beta == 0) {
    c.setZero();
  } else if (g.beta != 1) {
    c *= g.beta;
  }
  if (g.k == 0) return;
  Eigen::Map<const Mat, 0, Stride> a(g.a, g.ta ? g.k : g.m, g.ta ? g.m : g.k, Stride(g.lda));
  Eigen::Map<const Mat, 0, Stride> b(g.b, g.tb ? g.n : g.k, g.tb ? g.k : g.n, Stride(g.ldb));
  if (!g.ta && !g.tb) {
    c.noalias() += g.alpha * a * b;
  } else if (g.ta && !g.tb) {
    c.noalias() += g.alpha * a.transpose() * b;
  } else if (!g.ta && g.tb) {
    c.noalias() += g.alpha * a * b.transpose();
  } else {
    c.noalias() += g.alpha * a.transpose() * b.transpose();
  }
}

#if SEXTANT_GEMM_VARIANT == 0
GemmFn SelectGemm() {
#if defined(SEXTANT_GEMM_X86_VARIANTS)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw")) {
    return GemmAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return GemmAvx2;
#endif
  return GemmGeneric;
}

const char* SelectedGemmName() {
  GemmFn f = SelectGemm();
#if defined(SEXTANT_GEMM_X86_VARIANTS)
  if (f == GemmAvx512) return "avx512";
  if (f == GemmAvx2) return "avx2";
#endif
  (void)f;
  return "generic";
}
#endif

}  // namespace sextant::train::internal
