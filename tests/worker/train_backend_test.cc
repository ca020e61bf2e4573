#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "worker/train/backend.h"
#include "worker/train/counter_rng.h"
#include "worker/train/cpu_backend.h"

namespace sextant::train {
namespace {

std::vector<float> Random(int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 2 * UniformFloat(seed, i) - 1;
  return v;
}

Buffer Make(Backend& b, int64_t rows, int64_t cols, const std::vector<float>& values) {
  Buffer buf = *b.Allocate(rows, cols);
  b.Upload(values.data(), buf.view());
  return buf;
}

// Plain triple loop in double: the reference for every transpose combination.
std::vector<double> NaiveGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                              const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<double> c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        double av = ta ? a[p * m + i] : a[i * k + p];
        double bv = tb ? b[j * k + p] : b[p * n + j];
        s += av * bv;
      }
      c[i * n + j] = s;
    }
  }
  return c;
}

TEST(CpuBackendTest, GemmMatchesNaiveProductForAllTransposesAndBetas) {
  auto be = NewCpuBackend({.threads = 2});
  const int64_t m = 70, n = 90, k = 50;  // large enough to be split over threads
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (float beta : {0.0f, 1.0f, 0.5f}) {
        auto av = Random(m * k, 1), bv = Random(k * n, 2), cv = Random(m * n, 3);
        Buffer a = Make(*be, ta ? k : m, ta ? m : k, av);
        Buffer b = Make(*be, tb ? n : k, tb ? k : n, bv);
        Buffer c = Make(*be, m, n, cv);
        be->Gemm(ta ? Transpose::kYes : Transpose::kNo, tb ? Transpose::kYes : Transpose::kNo,
                 0.75f, a.view(), b.view(), beta, c.view());
        auto ref = NaiveGemm(ta, tb, m, n, k, av, bv);
        for (int64_t i = 0; i < m * n; ++i) {
          ASSERT_NEAR(c.view().data[i], 0.75 * ref[i] + beta * cv[i], 1e-4)
              << "ta=" << ta << " tb=" << tb << " beta=" << beta << " i=" << i;
        }
      }
    }
  }
}

TEST(CpuBackendTest, GemmWithBetaZeroIgnoresNaNInOutput) {
  auto be = NewCpuBackend({.threads = 1});
  Buffer a = Make(*be, 2, 2, {1, 2, 3, 4}), b = Make(*be, 2, 2, {1, 0, 0, 1});
  Buffer c = Make(*be, 2, 2, {NAN, NAN, NAN, NAN});
  be->Gemm(Transpose::kNo, Transpose::kNo, 1, a.view(), b.view(), 0, c.view());
  EXPECT_EQ(c.view().data[0], 1);
  EXPECT_EQ(c.view().data[3], 4);
}

TEST(CpuBackendTest, SgdStepFollowsMomentumAndWeightDecayFormula) {
  auto be = NewCpuBackend({.threads = 1});
  Buffer w = Make(*be, 1, 2, {1.0f, -2.0f}), g = Make(*be, 1, 2, {0.5f, 0.25f});
  Buffer v = Make(*be, 1, 2, {0.1f, 0.0f});
  be->SgdStep(w.view(), g.view(), v.view(), {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 0.01f});
  // g' = g + wd*w = {0.51, 0.23}; v = 0.9*v + g' = {0.60, 0.23}; w -= 0.1*v.
  EXPECT_FLOAT_EQ(v.view().data[0], 0.60f);
  EXPECT_FLOAT_EQ(v.view().data[1], 0.23f);
  EXPECT_FLOAT_EQ(w.view().data[0], 1.0f - 0.060f);
  EXPECT_FLOAT_EQ(w.view().data[1], -2.0f - 0.023f);
}

TEST(CpuBackendTest, AdamStepsFollowBiasCorrectedFormula) {
  auto be = NewCpuBackend({.threads = 1});
  Buffer w = Make(*be, 1, 1, {0.5f}), m = Make(*be, 1, 1, {0}), v = Make(*be, 1, 1, {0});
  double wr = 0.5, mr = 0, vr = 0;
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  const float grads[] = {0.3f, -0.2f, 0.05f};
  for (int t = 1; t <= 3; ++t) {
    Buffer g = Make(*be, 1, 1, {grads[t - 1]});
    be->AdamStep(w.view(), g.view(), m.view(), v.view(),
                 {.lr = 0.01f,
                  .beta1 = 0.9f,
                  .beta2 = 0.999f,
                  .eps = 1e-8f,
                  .weight_decay = 0.1f,
                  .step = t});
    const double gp = grads[t - 1] + wd * wr;
    mr = b1 * mr + (1 - b1) * gp;
    vr = b2 * vr + (1 - b2) * gp * gp;
    wr -= lr * (mr / (1 - std::pow(b1, t))) / (std::sqrt(vr / (1 - std::pow(b2, t))) + eps);
    EXPECT_NEAR(w.view().data[0], wr, 1e-6) << "step " << t;
    EXPECT_NEAR(m.view().data[0], mr, 1e-6 * std::abs(mr));
    EXPECT_NEAR(v.view().data[0], vr, 3e-5 * vr);  // 1 - 0.999f is 1.3e-5 off 0.001
  }
}

TEST(CpuBackendTest, SoftmaxCrossEntropyGivesLossAccuracyAndGradient) {
  auto be = NewCpuBackend({.threads = 1});
  Buffer logits = Make(*be, 2, 3, {1, 2, 3, 0, 0, 0});
  IntBuffer labels = *be->AllocateInts(2);
  const int32_t y[] = {2, 0};
  be->UploadInts(y, labels.view());
  Buffer d = *be->Allocate(2, 3);
  LossSums s = be->SoftmaxCrossEntropy(logits.view(), labels.view(), 0.5f, d.view());
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(s.loss, (lse - 3) + std::log(3.0), 1e-6);
  EXPECT_EQ(s.correct, 2);  // row 2 ties: the first maximum (class 0) wins
  EXPECT_EQ(s.nonfinite, 0);
  EXPECT_NEAR(d.view().data[2], 0.5 * (std::exp(3 - lse) - 1), 1e-6);
  EXPECT_NEAR(d.view().data[4], 0.5 / 3, 1e-6);
}

TEST(CpuBackendTest, SoftmaxCrossEntropyCountsNonFiniteRows) {
  auto be = NewCpuBackend({.threads = 1});
  Buffer logits = Make(*be, 2, 2, {NAN, 1, 0, 1});
  IntBuffer labels = *be->AllocateInts(2);
  const int32_t y[] = {0, 1};
  be->UploadInts(y, labels.view());
  LossSums s = be->SoftmaxCrossEntropy(logits.view(), labels.view(), 1, Tensor{});
  EXPECT_EQ(s.nonfinite, 1);
  EXPECT_TRUE(std::isfinite(s.loss));
}

TEST(CpuBackendTest, DropoutMaskDependsOnlyOnKeyAndGlobalRow) {
  auto be = NewCpuBackend({.threads = 2});
  const int64_t rows = 64, cols = 300;
  std::vector<float> ones(rows * cols, 1.0f);
  Buffer whole = Make(*be, rows, cols, ones), mask = *be->Allocate(rows, cols);
  be->Dropout(whole.view(), mask.view(), 0.25f, 42, 0);
  // The same batch in two halves, the second offset by its first row.
  Buffer lo = Make(*be, rows / 2, cols, ones), hi = Make(*be, rows / 2, cols, ones);
  Buffer m2 = *be->Allocate(rows / 2, cols);
  be->Dropout(lo.view(), m2.view(), 0.25f, 42, 0);
  be->Dropout(hi.view(), m2.view(), 0.25f, 42, rows / 2);
  int64_t dropped = 0;
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float got = i < rows * cols / 2 ? lo.view().data[i] : hi.view().data[i - rows * cols / 2];
    ASSERT_EQ(whole.view().data[i], got);
    ASSERT_TRUE(got == 0.0f || got == 1.0f / 0.75f);
    dropped += got == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / (rows * cols), 0.25, 0.02);
}

TEST(CpuBackendTest, Col2ImIsTheAdjointOfIm2Col) {
  // <Im2Col(x), c> == <x, Col2Im(c)> for random x and c.
  auto be = NewCpuBackend({.threads = 2});
  const ImageShape s{3, 5, 6, 2};
  const int k = 3;
  const int64_t patch = k * k * s.channels, pixels = s.batch * s.height * s.width;
  auto xv = Random(s.batch * s.height * s.width * s.channels, 7);
  auto cv = Random(pixels * patch, 8);
  Buffer x = Make(*be, s.batch, s.height * s.width * s.channels, xv);
  Buffer cols = *be->Allocate(pixels, patch), c = Make(*be, pixels, patch, cv);
  Buffer dx = *be->Allocate(s.batch, s.height * s.width * s.channels);
  be->Im2Col(x.view(), s, k, cols.view());
  be->Col2Im(c.view(), s, k, dx.view());
  double lhs = 0, rhs = 0;
  for (int64_t i = 0; i < pixels * patch; ++i) lhs += cols.view().data[i] * cv[i];
  for (size_t i = 0; i < xv.size(); ++i) rhs += xv[i] * dx.view().data[i];
  EXPECT_NEAR(lhs, rhs, 1e-3);
}

TEST(CpuBackendTest, MaxPoolRoutesGradientToTheMaximum) {
  auto be = NewCpuBackend({.threads = 1});
  // One 2x2 image, one channel: the maximum is the third pixel.
  Buffer x = Make(*be, 1, 4, {0.1f, 0.5f, 0.9f, 0.2f}), y = *be->Allocate(1, 1);
  IntBuffer arg = *be->AllocateInts(1);
  be->MaxPool(x.view(), {1, 2, 2, 1}, y.view(), arg.view());
  EXPECT_FLOAT_EQ(y.view().data[0], 0.9f);
  Buffer dy = Make(*be, 1, 1, {2.0f}), dx = Make(*be, 1, 4, {7, 7, 7, 7});
  be->MaxPoolBackward(dy.view(), arg.view(), dx.view());
  EXPECT_EQ(std::vector<float>(dx.view().data, dx.view().data + 4),
            (std::vector<float>{0, 0, 2, 0}));
}

TEST(CpuBackendTest, ReadableHostDataIsNotCopiedAndGatherRowsPicksRowsInOrder) {
  auto be = NewCpuBackend({.threads = 2});
  const std::vector<float> table = {0, 1, 10, 11, 20, 21, 30, 31};  // 4 rows x 2
  Buffer keep;
  const int64_t before = be->allocated_bytes();
  auto view = be->Readable(table.data(), 4, 2, &keep);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->data, table.data());
  EXPECT_TRUE(keep.empty());
  EXPECT_EQ(be->allocated_bytes(), before);
  const std::vector<int32_t> rows = {3, 0, 3};
  IntBuffer index = *be->AllocateInts(3);
  be->UploadInts(rows.data(), index.view());
  Buffer dst = *be->Allocate(3, 2);
  be->GatherRows(*view, index.view(), dst.view());
  EXPECT_EQ(std::vector<float>(dst.view().data, dst.view().data + 6),
            (std::vector<float>{30, 31, 0, 1, 30, 31}));
}

TEST(CpuBackendTest, ColumnSumIsIdenticalForEveryThreadCount) {
  auto v = Random(512 * 300, 9);
  std::vector<float> results[2];
  for (int t : {1, 2}) {
    auto be = NewCpuBackend({.threads = t});
    Buffer dy = Make(*be, 512, 300, v), db = Make(*be, 1, 300, std::vector<float>(300, 1.0f));
    be->ColumnSum(dy.view(), 1.0f, db.view());
    results[t - 1].assign(db.view().data, db.view().data + 300);
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(CpuBackendTest, AllocationBeyondTheLimitIsResourceExhausted) {
  auto be = NewCpuBackend({.threads = 1, .memory_limit_bytes = 4000});
  auto a = be->Allocate(10, 50);  // 2000 bytes
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(be->allocated_bytes(), 2000);
  auto b = be->Allocate(10, 60);  // 2400 more: over the limit
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  *a = Buffer();  // freeing makes room
  EXPECT_EQ(be->allocated_bytes(), 0);
  EXPECT_TRUE(be->Allocate(10, 60).ok());
}

}  // namespace
}  // namespace sextant::train
