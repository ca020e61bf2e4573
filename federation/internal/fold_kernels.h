#ifndef SEXTANT_FEDERATION_INTERNAL_FOLD_KERNELS_H_
#define SEXTANT_FEDERATION_INTERNAL_FOLD_KERNELS_H_

#include <cstddef>

// The inner loops of WeightedAverage's fold, one build per instruction set.
namespace sextant::internal {

// Folds n coordinates of a group of updates into double sums: p[j] with coefficient c[j], for
// j below the kernel's group width. start: s[i] = keep * acc[i] + sum (acc == nullptr:
// s[i] = sum); else s[i] += sum. The sum is a balanced tree, one fixed order per width.
using FoldKernel = void (*)(double* s, size_t n, bool start, const float* acc, double keep,
                            const float* const* p, const double* c);

// The widest group one kernel takes.
inline constexpr size_t kMaxFoldGroup = 12;

enum class FoldIsa { kPlain, kAvx2, kAvx512 };

// Whether this build and this CPU can run kernels built for isa (kPlain: always).
bool FoldIsaAvailable(FoldIsa isa);

// The fastest available isa.
FoldIsa BestFoldIsa();

// The kernel for a group of `width` updates, 1 <= width <= kMaxFoldGroup, built for isa, which
// must be available. Every isa gives the same sums bit for bit: the operations and their order
// are the same, and none is contracted into an FMA (the library is built with
// -ffp-contract=off).
FoldKernel FoldKernelFor(size_t width, FoldIsa isa);

}  // namespace sextant::internal

#endif  // SEXTANT_FEDERATION_INTERNAL_FOLD_KERNELS_H_
