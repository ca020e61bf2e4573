// Launchers for the trainer's element-wise CUDA kernels. A small C-like boundary: plain
// pointers and sizes in, a cudaError_t out, so the backend (cuda_backend.cc) stays ordinary C++.
// Every launcher enqueues on `stream` and returns the launch error (execution errors surface at
// the next synchronisation). Shapes follow worker/train/backend.h.
#ifndef SEXTANT_WORKER_CUDA_KERNELS_H_
#define SEXTANT_WORKER_CUDA_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

namespace sextant::cuda {

cudaError_t LaunchFill(float* x, int64_t n, float value, cudaStream_t s);
// dst row r = table row index[r], for `rows` rows of `cols` floats.
cudaError_t LaunchGatherRows(const float* table, const int32_t* index, int64_t rows, int64_t cols,
                             float* dst, cudaStream_t s);
cudaError_t LaunchAddBias(float* x, const float* bias, int64_t rows, int64_t cols, bool relu,
                          cudaStream_t s);
cudaError_t LaunchReluBackward(const float* y, float* dy, int64_t n, cudaStream_t s);
cudaError_t LaunchDropout(float* x, float* mask, int64_t rows, int64_t cols, float p, uint64_t key,
                          int64_t row_offset, cudaStream_t s);
cudaError_t LaunchMultiply(const float* mask, float* dy, int64_t n, cudaStream_t s);
cudaError_t LaunchScale(float* x, int64_t n, float factor, cudaStream_t s);
// Per row: loss (double), flags (bit 0: argmax == label, bit 1: loss not finite), and, when
// dlogits is not null, (softmax - onehot) * grad_scale.
cudaError_t LaunchSoftmaxCrossEntropy(const float* logits, const int32_t* labels, int64_t rows,
                                      int64_t classes, float grad_scale, float* dlogits,
                                      double* row_loss, int32_t* row_flags, cudaStream_t s);
cudaError_t LaunchIm2Col(const float* x, int64_t batch, int64_t height, int64_t width,
                         int64_t channels, int kernel, float* cols, cudaStream_t s);
cudaError_t LaunchCol2Im(const float* dcols, int64_t batch, int64_t height, int64_t width,
                         int64_t channels, int kernel, float* dx, cudaStream_t s);
cudaError_t LaunchMaxPool(const float* x, int64_t batch, int64_t height, int64_t width,
                          int64_t channels, float* y, int32_t* argmax, cudaStream_t s);
cudaError_t LaunchMaxPoolBackward(const float* dy, const int32_t* argmax, int64_t batch,
                                  int64_t per_out, int64_t per_in, float* dx, cudaStream_t s);
cudaError_t LaunchSgdStep(float* w, const float* g, float* velocity, int64_t n, float lr,
                          float momentum, float weight_decay, cudaStream_t s);
// step_size = lr / (1 - beta1^t) and bc2_sqrt = sqrt(1 - beta2^t), computed by the caller in
// double exactly as the CPU backend does.
cudaError_t LaunchAdamStep(float* w, const float* g, float* m, float* v, int64_t n, float step_size,
                           float bc2_sqrt, float beta1, float beta2, float eps, float weight_decay,
                           cudaStream_t s);

}  // namespace sextant::cuda

#endif  // SEXTANT_WORKER_CUDA_KERNELS_H_
