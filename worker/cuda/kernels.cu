#include <cmath>

#include "worker/cuda/kernels.h"
#include "worker/train/counter_rng.h"

namespace sextant::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > 65535 * 64 ? 65535 * 64 : b));
}

// Grid-stride loops keep every kernel correct for any n whatever the grid size.
#define SEXTANT_GRID_LOOP(i, n)                                                          \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)

__global__ void FillKernel(float* x, int64_t n, float value) {
  SEXTANT_GRID_LOOP(i, n) x[i] = value;
}

__global__ void GatherRowsKernel(const float* table, const int32_t* index, int64_t rows,
                                 int64_t cols, float* dst) {
  SEXTANT_GRID_LOOP(i, rows * cols) {
    dst[i] = table[static_cast<int64_t>(index[i / cols]) * cols + i % cols];
  }
}

__global__ void AddBiasKernel(float* x, const float* bias, int64_t rows, int64_t cols, bool relu) {
  SEXTANT_GRID_LOOP(i, rows * cols) {
    float v = x[i] + bias[i % cols];
    x[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void ReluBackwardKernel(const float* y, float* dy, int64_t n) {
  SEXTANT_GRID_LOOP(i, n) {
    if (!(y[i] > 0)) dy[i] = 0;
  }
}

__global__ void DropoutKernel(float* x, float* mask, int64_t rows, int64_t cols, float p,
                              uint64_t key, int64_t row_offset) {
  const float scale = 1.0f / (1.0f - p);
  SEXTANT_GRID_LOOP(i, rows * cols) {
    const int64_t r = i / cols, j = i % cols;
    const uint64_t counter = static_cast<uint64_t>((row_offset + r) * cols + j);
    float m = sextant::train::UniformFloat(key, counter) >= p ? scale : 0.0f;
    mask[i] = m;
    x[i] *= m;
  }
}

__global__ void MultiplyKernel(const float* mask, float* dy, int64_t n) {
  SEXTANT_GRID_LOOP(i, n) dy[i] *= mask[i];
}

__global__ void ScaleKernel(float* x, int64_t n, float factor) {
  SEXTANT_GRID_LOOP(i, n) x[i] *= factor;
}

// One thread per row: the class count is small (10), and the sums run in the CPU's order.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int64_t rows,
                                          int64_t k, float grad_scale, float* dlogits,
                                          double* row_loss, int32_t* row_flags) {
  SEXTANT_GRID_LOOP(r, rows) {
    const float* z = logits + r * k;
    int64_t best = 0;
    for (int64_t j = 1; j < k; ++j) {
      if (z[j] > z[best]) best = j;
    }
    const float zmax = z[best];
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += exp(static_cast<double>(z[j] - zmax));
    const int32_t label = labels[r];
    const double loss = log(sum) - static_cast<double>(z[label] - zmax);
    row_loss[r] = loss;
    row_flags[r] = (best == label ? 1 : 0) | (isfinite(loss) ? 0 : 2);
    if (dlogits != nullptr) {
      float* d = dlogits + r * k;
      for (int64_t j = 0; j < k; ++j) {
        const double p = exp(static_cast<double>(z[j] - zmax)) / sum;
        d[j] = static_cast<float>(p - (j == label ? 1.0 : 0.0)) * grad_scale;
      }
    }
  }
}

// One thread per output element of cols: (pixel, ky, kx, c).
__global__ void Im2ColKernel(const float* x, int64_t batch, int64_t H, int64_t W, int64_t C,
                             int kernel, float* cols) {
  const int64_t pad = kernel / 2, patch = static_cast<int64_t>(kernel) * kernel * C;
  SEXTANT_GRID_LOOP(i, batch * H * W * patch) {
    const int64_t pixel = i / patch, within = i % patch;
    const int64_t c = within % C, kk = within / C, kx = kk % kernel, ky = kk / kernel;
    const int64_t n = pixel / (H * W), yx = pixel % (H * W), y = yx / W, xo = yx % W;
    const int64_t iy = y + ky - pad, ix = xo + kx - pad;
    cols[i] = (iy < 0 || iy >= H || ix < 0 || ix >= W) ? 0.0f : x[((n * H + iy) * W + ix) * C + c];
  }
}

// A gather: each input value sums the patch entries that copied it, in (ky, kx) order, so the
// result is deterministic without atomics.
__global__ void Col2ImKernel(const float* dcols, int64_t batch, int64_t H, int64_t W, int64_t C,
                             int kernel, float* dx) {
  const int64_t pad = kernel / 2, patch = static_cast<int64_t>(kernel) * kernel * C;
  SEXTANT_GRID_LOOP(i, batch * H * W * C) {
    const int64_t c = i % C, pixel = i / C;
    const int64_t n = pixel / (H * W), yx = pixel % (H * W), iy = yx / W, ix = yx % W;
    float sum = 0;
    for (int64_t ky = 0; ky < kernel; ++ky) {
      const int64_t y = iy - ky + pad;
      if (y < 0 || y >= H) continue;
      for (int64_t kx = 0; kx < kernel; ++kx) {
        const int64_t xo = ix - kx + pad;
        if (xo < 0 || xo >= W) continue;
        sum += dcols[((n * H + y) * W + xo) * patch + (ky * kernel + kx) * C + c];
      }
    }
    dx[i] = sum;
  }
}

__global__ void MaxPoolKernel(const float* x, int64_t batch, int64_t H, int64_t W, int64_t C,
                              float* y, int32_t* argmax) {
  const int64_t Ho = H / 2, Wo = W / 2;
  SEXTANT_GRID_LOOP(i, batch * Ho * Wo * C) {
    const int64_t c = i % C, rest = i / C, ox = rest % Wo, oy = (rest / Wo) % Ho,
                  n = rest / (Wo * Ho);
    const float* img = x + n * H * W * C;
    int64_t best = ((2 * oy) * W + 2 * ox) * C + c;
    for (int64_t dy = 0; dy < 2; ++dy) {
      for (int64_t dx = 0; dx < 2; ++dx) {
        const int64_t idx = ((2 * oy + dy) * W + 2 * ox + dx) * C + c;
        if (img[idx] > img[best]) best = idx;
      }
    }
    y[i] = img[best];
    argmax[i] = static_cast<int32_t>(best);
  }
}

// 2x2 windows with stride 2 do not overlap, so each input receives at most one gradient.
__global__ void MaxPoolScatterKernel(const float* dy, const int32_t* argmax, int64_t batch,
                                     int64_t per_out, int64_t per_in, float* dx) {
  SEXTANT_GRID_LOOP(i, batch * per_out) {
    const int64_t n = i / per_out;
    dx[n * per_in + argmax[i]] += dy[i];
  }
}

__global__ void SgdKernel(float* w, const float* g, float* vel, int64_t n, float lr, float momentum,
                          float wd) {
  SEXTANT_GRID_LOOP(i, n) {
    float grad = g[i] + wd * w[i];
    float v = momentum * vel[i] + grad;
    vel[i] = v;
    w[i] -= lr * v;
  }
}

__global__ void AdamKernel(float* w, const float* g, float* m, float* v, int64_t n, float step_size,
                           float bc2_sqrt, float b1, float b2, float eps, float wd) {
  SEXTANT_GRID_LOOP(i, n) {
    float grad = g[i] + wd * w[i];
    float mi = b1 * m[i] + (1.0f - b1) * grad;
    float vi = b2 * v[i] + (1.0f - b2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    w[i] -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
  }
}

}  // namespace

cudaError_t LaunchFill(float* x, int64_t n, float value, cudaStream_t s) {
  FillKernel<<<Blocks(n), kThreads, 0, s>>>(x, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchGatherRows(const float* table, const int32_t* index, int64_t rows, int64_t cols,
                             float* dst, cudaStream_t s) {
  GatherRowsKernel<<<Blocks(rows * cols), kThreads, 0, s>>>(table, index, rows, cols, dst);
  return cudaGetLastError();
}

cudaError_t LaunchAddBias(float* x, const float* bias, int64_t rows, int64_t cols, bool relu,
                          cudaStream_t s) {
  AddBiasKernel<<<Blocks(rows * cols), kThreads, 0, s>>>(x, bias, rows, cols, relu);
  return cudaGetLastError();
}

cudaError_t LaunchReluBackward(const float* y, float* dy, int64_t n, cudaStream_t s) {
  ReluBackwardKernel<<<Blocks(n), kThreads, 0, s>>>(y, dy, n);
  return cudaGetLastError();
}

cudaError_t LaunchDropout(float* x, float* mask, int64_t rows, int64_t cols, float p, uint64_t key,
                          int64_t row_offset, cudaStream_t s) {
  DropoutKernel<<<Blocks(rows * cols), kThreads, 0, s>>>(x, mask, rows, cols, p, key, row_offset);
  return cudaGetLastError();
}

cudaError_t LaunchMultiply(const float* mask, float* dy, int64_t n, cudaStream_t s) {
  MultiplyKernel<<<Blocks(n), kThreads, 0, s>>>(mask, dy, n);
  return cudaGetLastError();
}

cudaError_t LaunchScale(float* x, int64_t n, float factor, cudaStream_t s) {
  ScaleKernel<<<Blocks(n), kThreads, 0, s>>>(x, n, factor);
  return cudaGetLastError();
}

cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t rows,
                                      int64_t classes, float grad_scale, float* dlogits,
                                      double* row_loss, int32_t* row_flags, cudaStream_t s) {
  SoftmaxCrossEntropyKernel<<<Blocks(rows), kThreads, 0, s>>>(
      logits, labels, rows, classes, grad_scale, dlogits, row_loss, row_flags);
  return cudaGetLastError();
}

cudaError_t LaunchIm2Col(const float* x, int64_t batch, int64_t height, int64_t width,
                         int64_t channels, int kernel, float* cols, cudaStream_t s) {
  int64_t n = batch * height * width * kernel * kernel * channels;
  Im2ColKernel<<<Blocks(n), kThreads, 0, s>>>(x, batch, height, width, channels, kernel, cols);
  return cudaGetLastError();
}

cudaError_t LaunchCol2Im(const float* dcols, int64_t batch, int64_t height, int64_t width,
                         int64_t channels, int kernel, float* dx, cudaStream_t s) {
  int64_t n = batch * height * width * channels;
  Col2ImKernel<<<Blocks(n), kThreads, 0, s>>>(dcols, batch, height, width, channels, kernel, dx);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPool(const float* x, int64_t batch, int64_t height, int64_t width,
                          int64_t channels, float* y, int32_t* argmax, cudaStream_t s) {
  int64_t n = batch * (height / 2) * (width / 2) * channels;
  MaxPoolKernel<<<Blocks(n), kThreads, 0, s>>>(x, batch, height, width, channels, y, argmax);
  return cudaGetLastError();
}

cudaError_t LaunchMaxPoolBackward(const float* dy, const int32_t* argmax, int64_t batch,
                                  int64_t per_out, int64_t per_in, float* dx, cudaStream_t s) {
  cudaError_t e = cudaMemsetAsync(dx, 0, batch * per_in * sizeof(float), s);
  if (e != cudaSuccess) return e;
  MaxPoolScatterKernel<<<Blocks(batch * per_out), kThreads, 0, s>>>(dy, argmax, batch, per_out,
                                                                    per_in, dx);
  return cudaGetLastError();
}

cudaError_t LaunchSgdStep(float* w, const float* g, float* velocity, int64_t n, float lr,
                          float momentum, float weight_decay, cudaStream_t s) {
  SgdKernel<<<Blocks(n), kThreads, 0, s>>>(w, g, velocity, n, lr, momentum, weight_decay);
  return cudaGetLastError();
}

cudaError_t LaunchAdamStep(float* w, const float* g, float* m, float* v, int64_t n, float step_size,
                           float bc2_sqrt, float beta1, float beta2, float eps, float weight_decay,
                           cudaStream_t s) {
  AdamKernel<<<Blocks(n), kThreads, 0, s>>>(w, g, m, v, n, step_size, bc2_sqrt, beta1, beta2, eps,
                                            weight_decay);
  return cudaGetLastError();
}

}  // namespace sextant::cuda
