#include "federation/internal/fold_kernels.h"

#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace sextant::internal {
namespace {

struct Case {
  std::vector<std::vector<float>> u;
  std::vector<const float*> p;
  std::vector<double> c;
  std::vector<float> acc;
};

Case MakeCase(size_t width, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> coefficient(0.0, 1.0);
  Case k;
  k.u.assign(width, std::vector<float>(n));
  for (auto& row : k.u) {
    for (float& x : row) x = normal(rng) * static_cast<float>(1 + rng() % 1000);
  }
  for (const auto& row : k.u) k.p.push_back(row.data());
  for (size_t j = 0; j < width; ++j) k.c.push_back(coefficient(rng) / static_cast<double>(width));
  k.acc.resize(n);
  for (float& x : k.acc) x = normal(rng);
  return k;
}

// Runs the three modes of a kernel (start from zero, start from a mean, add to sums) one after
// the other on the same sums.
std::vector<double> RunModes(FoldKernel kernel, const Case& k, size_t n) {
  std::vector<double> out;
  std::vector<double> s(n);
  kernel(s.data(), n, /*start=*/true, nullptr, 0.0, k.p.data(), k.c.data());
  out.insert(out.end(), s.begin(), s.end());
  kernel(s.data(), n, /*start=*/true, k.acc.data(), 0.375, k.p.data(), k.c.data());
  out.insert(out.end(), s.begin(), s.end());
  kernel(s.data(), n, /*start=*/false, nullptr, 0.0, k.p.data(), k.c.data());
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

TEST(FoldKernelsTest, EveryInstructionSetGivesThePlainBuildsSumsBitForBit) {
  // 1000 coordinates: whole vectors and a ragged tail in every build.
  constexpr size_t kN = 1000;
  int compared = 0;
  for (FoldIsa isa : {FoldIsa::kAvx2, FoldIsa::kAvx512}) {
    if (!FoldIsaAvailable(isa)) continue;
    for (size_t width = 1; width <= kMaxFoldGroup; ++width) {
      const Case k = MakeCase(width, kN, static_cast<uint32_t>(width));
      const std::vector<double> plain = RunModes(FoldKernelFor(width, FoldIsa::kPlain), k, kN);
      const std::vector<double> built = RunModes(FoldKernelFor(width, isa), k, kN);
      ASSERT_EQ(std::memcmp(plain.data(), built.data(), plain.size() * sizeof(double)), 0)
          << "width " << width << ", isa " << static_cast<int>(isa);
      ++compared;
    }
  }
  if (compared == 0) GTEST_SKIP() << "this CPU has only the plain build";
  RecordProperty("widths_compared", compared);
}

TEST(FoldKernelsTest, SumsMatchTheBalancedTreeWrittenOut) {
  // Width 3: (c0 u0 + c1 u1) + c2 u2; width 5: ((c0 u0 + c1 u1) + c2 u2) + (c3 u3 + c4 u4).
  constexpr size_t kN = 37;
  for (size_t width : {3, 5}) {
    const Case k = MakeCase(width, kN, 7);
    std::vector<double> s(kN);
    FoldKernelFor(width, BestFoldIsa())(s.data(), kN, true, nullptr, 0.0, k.p.data(), k.c.data());
    for (size_t i = 0; i < kN; ++i) {
      auto t = [&](size_t j) { return k.c[j] * static_cast<double>(k.u[j][i]); };
      const double want =
          width == 3 ? (t(0) + t(1)) + t(2) : ((t(0) + t(1)) + t(2)) + (t(3) + t(4));
      ASSERT_EQ(s[i], want) << "width " << width << ", coordinate " << i;
    }
  }
}

}  // namespace
}  // namespace sextant::internal
