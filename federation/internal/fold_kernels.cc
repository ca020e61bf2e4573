#include "federation/internal/fold_kernels.h"

#include <array>
#include <utility>

namespace sextant::internal {
namespace {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define SEXTANT_X86_BUILDS 1
#endif

// c_0 u_0[i] + ... + c_{Hi-1} u_{Hi-1}[i], summed as a balanced tree: a fixed order for each
// group size, so that results do not depend on the CPU or the thread count.
template <int Lo, int Hi>
[[gnu::always_inline]] inline double Tree(const float* const* u, const double* c, size_t i) {
  if constexpr (Hi - Lo == 1) {
    return c[Lo] * u[Lo][i];
  } else {
    constexpr int kMid = Lo + (Hi - Lo + 1) / 2;
    return Tree<Lo, kMid>(u, c, i) + Tree<kMid, Hi>(u, c, i);
  }
}

template <int N>
[[gnu::always_inline]] inline void FoldGroup(double* __restrict s, size_t n, bool start,
                                             const float* __restrict acc, double keep,
                                             const float* const* p, const double* c) {
  const float* u[N];
  double k[N];
  for (int j = 0; j < N; ++j) {
    u[j] = p[j];
    k[j] = c[j];
  }
  if (!start) {
    for (size_t i = 0; i < n; ++i) s[i] += Tree<0, N>(u, k, i);
  } else if (acc == nullptr) {
    for (size_t i = 0; i < n; ++i) s[i] = Tree<0, N>(u, k, i);
  } else {
    for (size_t i = 0; i < n; ++i) s[i] = keep * acc[i] + Tree<0, N>(u, k, i);
  }
}

// FoldGroup<N> built for one instruction set. With AVX-512 the conversions to double, which
// bound the fold's speed with AVX2, take 8 floats at once.
#define SEXTANT_FOLD_KERNEL(Name, ...)                                                           \
  template <int N>                                                                               \
  __VA_ARGS__ void Name(double* __restrict s, size_t n, bool start, const float* __restrict acc, \
                        double keep, const float* const* p, const double* c) {                   \
    FoldGroup<N>(s, n, start, acc, keep, p, c);                                                  \
  }
SEXTANT_FOLD_KERNEL(FoldPlain)
#ifdef SEXTANT_X86_BUILDS
SEXTANT_FOLD_KERNEL(FoldAvx2, __attribute__((target("avx2"))))
SEXTANT_FOLD_KERNEL(FoldAvx512,
                    __attribute__((target("avx512f,avx512vl,avx512dq,prefer-vector-width=512"))))
#endif
#undef SEXTANT_FOLD_KERNEL

using Kernels = std::array<FoldKernel, kMaxFoldGroup>;

template <size_t... I>
Kernels PlainKernels(std::index_sequence<I...>) {
  return {&FoldPlain<static_cast<int>(I) + 1>...};
}
#ifdef SEXTANT_X86_BUILDS
template <size_t... I>
Kernels Avx2Kernels(std::index_sequence<I...>) {
  return {&FoldAvx2<static_cast<int>(I) + 1>...};
}
template <size_t... I>
Kernels Avx512Kernels(std::index_sequence<I...>) {
  return {&FoldAvx512<static_cast<int>(I) + 1>...};
}
#endif

}  // namespace

bool FoldIsaAvailable(FoldIsa isa) {
  switch (isa) {
    case FoldIsa::kPlain:
      return true;
#ifdef SEXTANT_X86_BUILDS
    case FoldIsa::kAvx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2");
    case FoldIsa::kAvx512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq");
#endif
    default:
      return false;
  }
}

FoldIsa BestFoldIsa() {
  if (FoldIsaAvailable(FoldIsa::kAvx512)) return FoldIsa::kAvx512;
  if (FoldIsaAvailable(FoldIsa::kAvx2)) return FoldIsa::kAvx2;
  return FoldIsa::kPlain;
}

FoldKernel FoldKernelFor(size_t width, FoldIsa isa) {
  static const Kernels plain = PlainKernels(std::make_index_sequence<kMaxFoldGroup>());
#ifdef SEXTANT_X86_BUILDS
  static const Kernels avx2 = Avx2Kernels(std::make_index_sequence<kMaxFoldGroup>());
  static const Kernels avx512 = Avx512Kernels(std::make_index_sequence<kMaxFoldGroup>());
  if (isa == FoldIsa::kAvx512) return avx512[width - 1];
  if (isa == FoldIsa::kAvx2) return avx2[width - 1];
#endif
  return plain[width - 1];
}

}  // namespace sextant::internal
