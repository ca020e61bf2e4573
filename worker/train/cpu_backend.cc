#include "worker/train/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/train/accounted_backend.h"
#include "worker/train/counter_rng.h"
#include "worker/train/internal/gemm_kernel.h"

namespace sextant::train {
namespace {

class CpuBackend : public AccountedBackend {
 public:
  explicit CpuBackend(const CpuBackendOptions& o)
      : AccountedBackend(o.memory_limit_bytes),
        threads_(std::max(1, o.threads)),
        gemm_(internal::SelectGemm()) {}

  ~CpuBackend() override { ReleaseAll(); }

  std::string name() const override {
    return absl::StrCat("cpu(", threads_, " threads, ", internal::SelectedGemmName(), ")");
  }

  void Upload(const float* host, Tensor dst) override {
    std::memcpy(dst.data, host, dst.size() * sizeof(float));
  }
  void UploadInts(const int32_t* host, IntTensor dst) override {
    std::memcpy(dst.data, host, dst.size * sizeof(int32_t));
  }
  void Download(const Tensor& src, float* host) override {
    std::memcpy(host, src.data, src.size() * sizeof(float));
  }
  void Fill(Tensor t, float value) override {
    ForEach(t.size(), [&](int64_t i) { t.data[i] = value; });
  }
  // Host memory is this backend's memory: no copy.
  absl::StatusOr<Tensor> Readable(const float* host, int64_t rows, int64_t cols,
                                  Buffer* /*keep*/) override {
    return Tensor{const_cast<float*>(host), rows, cols};
  }
  void GatherRows(const Tensor& table, const IntTensor& index, Tensor dst) override {
    ForRows(index.size, table.cols, [&](int64_t r) {
      std::memcpy(dst.data + r * table.cols, table.data + int64_t{index.data[r]} * table.cols,
                  table.cols * sizeof(float));
    });
  }

  void Gemm(Transpose ta, Transpose tb, float alpha, const Tensor& a, const Tensor& b, float beta,
            Tensor c) override;

  void AddBias(Tensor x, const Tensor& bias, bool relu) override {
    const int64_t n = x.cols;
    ForRows(x.rows, n, [&](int64_t r) {
      float* row = x.data + r * n;
      if (relu) {
        for (int64_t j = 0; j < n; ++j) row[j] = std::max(row[j] + bias.data[j], 0.0f);
      } else {
        for (int64_t j = 0; j < n; ++j) row[j] += bias.data[j];
      }
    });
  }

  void ReluBackward(const Tensor& y, Tensor dy) override {
    ForEach(dy.size(), [&](int64_t i) {
      if (!(y.data[i] > 0)) dy.data[i] = 0;
    });
  }

  void Dropout(Tensor x, Tensor mask, float p, uint64_t key, int64_t row_offset) override {
    const float scale = 1.0f / (1.0f - p);
    const int64_t n = x.cols;
    ForRows(x.rows, n, [&](int64_t r) {
      const uint64_t base = static_cast<uint64_t>((row_offset + r) * n);
      for (int64_t j = 0; j < n; ++j) {
        float m = UniformFloat(key, base + j) >= p ? scale : 0.0f;
        mask.data[r * n + j] = m;
        x.data[r * n + j] *= m;
      }
    });
  }

  void Multiply(const Tensor& mask, Tensor dy) override {
    ForEach(dy.size(), [&](int64_t i) { dy.data[i] *= mask.data[i]; });
  }

  void ColumnSum(const Tensor& dy, float beta, Tensor db) override;
  LossSums SoftmaxCrossEntropy(const Tensor& logits, const IntTensor& labels, float grad_scale,
                               Tensor dlogits) override;
  void Im2Col(const Tensor& x, const ImageShape& s, int kernel, Tensor cols) override;
  void Col2Im(const Tensor& dcols, const ImageShape& s, int kernel, Tensor dx) override;
  void MaxPool(const Tensor& x, const ImageShape& s, Tensor y, IntTensor argmax) override;
  void MaxPoolBackward(const Tensor& dy, const IntTensor& argmax, Tensor dx) override;

  void SgdStep(Tensor w, const Tensor& g, Tensor vel, const SgdHyper& h) override {
    ForEach(w.size(), [&](int64_t i) {
      float grad = g.data[i] + h.weight_decay * w.data[i];
      float v = h.momentum * vel.data[i] + grad;
      vel.data[i] = v;
      w.data[i] -= h.lr * v;
    });
  }

  void AdamStep(Tensor w, const Tensor& g, Tensor m, Tensor v, const AdamHyper& h) override {
    const double t = static_cast<double>(h.step);
    const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(double{h.beta1}, t)));
    const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(double{h.beta2}, t)));
    const float b1 = h.beta1, b2 = h.beta2, wd = h.weight_decay, eps = h.eps;
    ForEach(w.size(), [&](int64_t i) {
      float grad = g.data[i] + wd * w.data[i];
      float mi = b1 * m.data[i] + (1.0f - b1) * grad;
      float vi = b2 * v.data[i] + (1.0f - b2) * grad * grad;
      m.data[i] = mi;
      v.data[i] = vi;
      w.data[i] -= step_size * mi / (std::sqrt(vi) / bc2_sqrt + eps);
    });
  }

 private:
  absl::StatusOr<void*> RawAllocate(int64_t bytes) override {
    size_t rounded = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cpu backend: out of memory allocating ", bytes, " bytes"));
    }
    std::memset(p, 0, rounded);
    return p;
  }
  void RawFree(void* p) override { std::free(p); }

  // Runs f(i) for i in [0, n), split into contiguous static chunks over the threads. Small loops
  // stay on the calling thread, where a fork would cost more than it saves.
  template <typename F>
  void ForEach(int64_t n, F&& f) {
    if (threads_ == 1 || n < 16384) {
      for (int64_t i = 0; i < n; ++i) f(i);
      return;
    }
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  }

  // Runs f(r) for each row r in [0, rows) of a matrix with `cols` columns.
  template <typename F>
  void ForRows(int64_t rows, int64_t cols, F&& f) {
    if (threads_ == 1 || rows * cols < 16384 || rows < 2) {
      for (int64_t r = 0; r < rows; ++r) f(r);
      return;
    }
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t r = 0; r < rows; ++r) f(r);
  }

  const int threads_;
  const internal::GemmFn gemm_;
  std::vector<double> row_loss_;
  std::vector<int32_t> row_flags_;
};

void CpuBackend::Gemm(Transpose ta, Transpose tb, float alpha, const Tensor& a, const Tensor& b,
                      float beta, Tensor c) {
  internal::GemmArgs g;
  g.ta = ta == Transpose::kYes;
  g.tb = tb == Transpose::kYes;
  g.m = c.rows;
  g.n = c.cols;
  g.k = g.ta ? a.rows : a.cols;
  g.alpha = alpha;
  g.a = a.data;
  g.lda = a.cols;
  g.b = b.data;
  g.ldb = b.cols;
  g.beta = beta;
  g.c = c.data;
  g.ldc = c.cols;
  // Each thread computes a disjoint block of c (split along its larger side, in multiples of 16)
  // with the full k range, so no sums cross threads and the result depends only on the split.
  const bool split_rows = g.m >= g.n;
  const int64_t extent = split_rows ? g.m : g.n;
  const int64_t work = g.m * g.n * std::max<int64_t>(g.k, 1);
  int parts = static_cast<int>(std::min<int64_t>(threads_, extent / 16));
  if (work < (int64_t{1} << 18)) parts = 1;
  if (parts <= 1) {
    gemm_(g);
    return;
  }
  const int64_t chunk = (extent / parts + 15) / 16 * 16;
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; ++p) {
    const int64_t begin = std::min<int64_t>(extent, p * chunk);
    const int64_t end = p == parts - 1 ? extent : std::min<int64_t>(extent, begin + chunk);
    if (begin >= end) continue;
    internal::GemmArgs part = g;
    if (split_rows) {
      part.m = end - begin;
      part.a = g.ta ? g.a + begin : g.a + begin * g.lda;
      part.c = g.c + begin * g.ldc;
    } else {
      part.n = end - begin;
      part.b = g.tb ? g.b + begin * g.ldb : g.b + begin;
      part.c = g.c + begin;
    }
    gemm_(part);
  }
}

void CpuBackend::ColumnSum(const Tensor& dy, float beta, Tensor db) {
  const int64_t n = dy.cols;
  // Columns are split over threads; each column is summed over rows in order, so the result is
  // the same for every thread count.
  const int parts = (threads_ > 1 && dy.size() >= 16384 && n >= 32) ? threads_ : 1;
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; ++p) {
    const int64_t begin = n * p / parts, end = n * (p + 1) / parts;
    float* out = db.data;
    for (int64_t j = begin; j < end; ++j) out[j] = beta == 0 ? 0.0f : beta * out[j];
    for (int64_t r = 0; r < dy.rows; ++r) {
      const float* row = dy.data + r * n;
      for (int64_t j = begin; j < end; ++j) out[j] += row[j];
    }
  }
}

LossSums CpuBackend::SoftmaxCrossEntropy(const Tensor& logits, const IntTensor& labels,
                                         float grad_scale, Tensor dlogits) {
  const int64_t rows = logits.rows, k = logits.cols;
  row_loss_.assign(rows, 0.0);
  row_flags_.assign(rows, 0);
  ForRows(rows, k * 64, [&](int64_t r) {
    const float* z = logits.data + r * k;
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j) {
      if (z[j] > z[best]) best = j;
    }
    const float zmax = z[best];
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += std::exp(static_cast<double>(z[j] - zmax));
    const int32_t label = labels.data[r];
    const double loss = std::log(sum) - static_cast<double>(z[label] - zmax);
    row_loss_[r] = loss;
    row_flags_[r] = (best == label ? 1 : 0) | (std::isfinite(loss) ? 0 : 2);
    if (dlogits.data != nullptr) {
      float* d = dlogits.data + r * k;
      for (int64_t j = 0; j < k; ++j) {
        const double p = std::exp(static_cast<double>(z[j] - zmax)) / sum;
        d[j] = static_cast<float>(p - (j == label ? 1.0 : 0.0)) * grad_scale;
      }
    }
  });
  LossSums sums;
  for (int64_t r = 0; r < rows; ++r) {
    if (row_flags_[r] & 2) {
      ++sums.nonfinite;
    } else {
      sums.loss += row_loss_[r];
    }
    sums.correct += row_flags_[r] & 1;
  }
  return sums;
}

void CpuBackend::Im2Col(const Tensor& x, const ImageShape& s, int kernel, Tensor cols) {
  const int64_t H = s.height, W = s.width, C = s.channels, pad = kernel / 2;
  const int64_t patch = static_cast<int64_t>(kernel) * kernel * C;
  ForRows(s.batch * H, W * patch, [&](int64_t ny) {
    const int64_t n = ny / H, y = ny % H;
    const float* img = x.data + n * H * W * C;
    for (int64_t xo = 0; xo < W; ++xo) {
      float* out = cols.data + ((n * H + y) * W + xo) * patch;
      for (int64_t ky = 0; ky < kernel; ++ky) {
        const int64_t iy = y + ky - pad;
        for (int64_t kx = 0; kx < kernel; ++kx) {
          const int64_t ix = xo + kx - pad;
          float* dst = out + (ky * kernel + kx) * C;
          if (iy < 0 || iy >= H || ix < 0 || ix >= W) {
            std::memset(dst, 0, C * sizeof(float));
          } else {
            std::memcpy(dst, img + (iy * W + ix) * C, C * sizeof(float));
          }
        }
      }
    }
  });
}

void CpuBackend::Col2Im(const Tensor& dcols, const ImageShape& s, int kernel, Tensor dx) {
  const int64_t H = s.height, W = s.width, C = s.channels, pad = kernel / 2;
  const int64_t patch = static_cast<int64_t>(kernel) * kernel * C;
  // One image per iteration: its sums run in a fixed order whatever the thread count.
  ForRows(s.batch, H * W * patch, [&](int64_t n) {
    float* img = dx.data + n * H * W * C;
    std::memset(img, 0, H * W * C * sizeof(float));
    for (int64_t y = 0; y < H; ++y) {
      for (int64_t xo = 0; xo < W; ++xo) {
        const float* in = dcols.data + ((n * H + y) * W + xo) * patch;
        for (int64_t ky = 0; ky < kernel; ++ky) {
          const int64_t iy = y + ky - pad;
          if (iy < 0 || iy >= H) continue;
          for (int64_t kx = 0; kx < kernel; ++kx) {
            const int64_t ix = xo + kx - pad;
            if (ix < 0 || ix >= W) continue;
            float* dst = img + (iy * W + ix) * C;
            const float* src = in + (ky * kernel + kx) * C;
            for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
          }
        }
      }
    }
  });
}

void CpuBackend::MaxPool(const Tensor& x, const ImageShape& s, Tensor y, IntTensor argmax) {
  const int64_t H = s.height, W = s.width, C = s.channels, Ho = H / 2, Wo = W / 2;
  ForRows(s.batch, H * W * C, [&](int64_t n) {
    const float* img = x.data + n * H * W * C;
    float* out = y.data + n * Ho * Wo * C;
    int32_t* arg = argmax.data + n * Ho * Wo * C;
    for (int64_t oy = 0; oy < Ho; ++oy) {
      for (int64_t ox = 0; ox < Wo; ++ox) {
        for (int64_t c = 0; c < C; ++c) {
          int64_t best = ((2 * oy) * W + 2 * ox) * C + c;
          for (int64_t dy = 0; dy < 2; ++dy) {
            for (int64_t dx = 0; dx < 2; ++dx) {
              const int64_t idx = ((2 * oy + dy) * W + 2 * ox + dx) * C + c;
              if (img[idx] > img[best]) best = idx;
            }
          }
          const int64_t o = (oy * Wo + ox) * C + c;
          out[o] = img[best];
          arg[o] = static_cast<int32_t>(best);
        }
      }
    }
  });
}

void CpuBackend::MaxPoolBackward(const Tensor& dy, const IntTensor& argmax, Tensor dx) {
  const int64_t per_out = dy.cols, per_in = dx.cols;
  ForRows(dy.rows, per_in, [&](int64_t n) {
    float* img = dx.data + n * per_in;
    std::memset(img, 0, per_in * sizeof(float));
    const float* g = dy.data + n * per_out;
    const int32_t* arg = argmax.data + n * per_out;
    for (int64_t o = 0; o < per_out; ++o) img[arg[o]] += g[o];
  });
}

}  // namespace

std::unique_ptr<Backend> NewCpuBackend(const CpuBackendOptions& options) {
  return std::make_unique<CpuBackend>(options);
}

}  // namespace sextant::train
