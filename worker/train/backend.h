// The operations one training step needs, over buffers that a backend owns. The CPU backend
// (cpu_backend.h) keeps buffers in host memory; a CUDA backend keeps them in device memory and
// implements the same calls with cuBLAS and its own kernels, so models and optimisers are written
// once, against this interface.
#ifndef SEXTANT_WORKER_TRAIN_BACKEND_H_
#define SEXTANT_WORKER_TRAIN_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sextant::train {

// A non-owning view of a row-major matrix in a backend's memory. A vector is a 1 x n matrix.
struct Tensor {
  float* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;

  int64_t size() const { return rows * cols; }
  // Rows [begin, begin + count) of this matrix.
  Tensor RowBlock(int64_t begin, int64_t count) const { return {data + begin * cols, count, cols}; }
  // The same memory seen as a rows x cols matrix (rows * cols must equal size()).
  Tensor Reshaped(int64_t r, int64_t c) const { return {data, r, c}; }
};

// A non-owning view of int32 values in a backend's memory (labels, pooling indices).
struct IntTensor {
  int32_t* data = nullptr;
  int64_t size = 0;
};

class Backend;

// Frees backend memory on destruction. Move-only.
struct BackendDeleter {
  Backend* backend = nullptr;
  void operator()(void* p) const;
};

// An owned float buffer shaped rows x cols. Must not outlive its backend.
class Buffer {
 public:
  Buffer() = default;
  Buffer(float* data, int64_t rows, int64_t cols, Backend* backend)
      : mem_(data, BackendDeleter{backend}), rows_(rows), cols_(cols) {}
  Tensor view() const { return {static_cast<float*>(mem_.get()), rows_, cols_}; }
  bool empty() const { return mem_ == nullptr; }

 private:
  std::unique_ptr<void, BackendDeleter> mem_;
  int64_t rows_ = 0, cols_ = 0;
};

// An owned int32 buffer. Must not outlive its backend.
class IntBuffer {
 public:
  IntBuffer() = default;
  IntBuffer(int32_t* data, int64_t size, Backend* backend)
      : mem_(data, BackendDeleter{backend}), size_(size) {}
  IntTensor view() const { return {static_cast<int32_t*>(mem_.get()), size_}; }

 private:
  std::unique_ptr<void, BackendDeleter> mem_;
  int64_t size_ = 0;
};

enum class Transpose { kNo, kYes };

// The geometry of a 2-D convolution (stride 1, square kernel, zero padding) or a 2x2 max pool
// over a batch of images stored NHWC: one image per row, pixels row by row, channels innermost.
struct ImageShape {
  int64_t batch = 0, height = 0, width = 0, channels = 0;
};

// Sums from a softmax cross-entropy over a batch, accumulated in row order.
struct LossSums {
  double loss = 0;        // sum of -log softmax(logits)[label] over the finite rows
  int64_t correct = 0;    // rows whose largest logit is the label (first maximum wins)
  int64_t nonfinite = 0;  // rows whose loss is NaN or infinite
};

struct SgdHyper {
  float lr = 0.01f, momentum = 0.9f, weight_decay = 0;
};

struct AdamHyper {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0;
  int64_t step = 1;  // 1-based count of updates, including this one (for bias correction)
};

// Executes training math. Not thread-safe: one training loop drives one backend. Every call is
// deterministic: with the same inputs (and, for the CPU backend, the same thread count) results
// are bit-identical. Calls may run asynchronously; Synchronize() waits for them.
class Backend {
 public:
  virtual ~Backend() = default;

  // A short name for logs, e.g. "cpu(2 threads)" or "cuda:0".
  virtual std::string name() const = 0;

  // A zero-filled rows x cols buffer. ResourceExhausted (naming the size) when the memory limit
  // would be exceeded or the allocation fails; callers may retry with smaller batches.
  virtual absl::StatusOr<Buffer> Allocate(int64_t rows, int64_t cols) = 0;
  // A zero-filled int32 buffer of n values; errors as Allocate.
  virtual absl::StatusOr<IntBuffer> AllocateInts(int64_t n) = 0;
  // Returns memory obtained from Allocate/AllocateInts. Called by the buffers' deleters.
  virtual void Release(void* p) = 0;
  // Bytes currently allocated through this backend.
  virtual int64_t allocated_bytes() const = 0;

  // Host <-> backend copies of dst.size() / src.size() values.
  virtual void Upload(const float* host, Tensor dst) = 0;
  virtual void UploadInts(const int32_t* host, IntTensor dst) = 0;
  virtual void Download(const Tensor& src, float* host) = 0;
  virtual void Fill(Tensor t, float value) = 0;
  // A view of the host's rows x cols floats that this backend's kernels can read, valid while
  // `host` lives and `*keep` is held. By default a copy in a buffer allocated into *keep (errors
  // as Allocate); a backend that computes in host memory returns the host memory itself.
  virtual absl::StatusOr<Tensor> Readable(const float* host, int64_t rows, int64_t cols,
                                          Buffer* keep);
  // dst row r = table row index[r], for r < index.size (dst is index.size x table.cols; every
  // index in [0, table.rows)). How a batch is drawn from a dataset held by the backend.
  virtual void GatherRows(const Tensor& table, const IntTensor& index, Tensor dst) = 0;

  // c = alpha * op(a) * op(b) + beta * c, all row-major; op(a) is c.rows x k, op(b) k x c.cols.
  // beta = 0 ignores c's previous contents (NaN included).
  virtual void Gemm(Transpose ta, Transpose tb, float alpha, const Tensor& a, const Tensor& b,
                    float beta, Tensor c) = 0;
  // x[r][j] += bias[j] for every row r; then x = max(x, 0) when `relu`.
  virtual void AddBias(Tensor x, const Tensor& bias, bool relu) = 0;
  // dy[i] = 0 where y[i] <= 0 (the gradient through a ReLU whose output was y).
  virtual void ReluBackward(const Tensor& y, Tensor dy) = 0;
  // Inverted dropout: mask[r][j] = (u >= p) / (1 - p) and x *= mask, where u is
  // UniformFloat(key, (row_offset + r) * x.cols + j) (counter_rng.h). Offsetting by row makes a
  // batch split into micro-batches draw the same mask as the whole batch. p in [0, 1).
  virtual void Dropout(Tensor x, Tensor mask, float p, uint64_t key, int64_t row_offset) = 0;
  // dy *= mask, element-wise.
  virtual void Multiply(const Tensor& mask, Tensor dy) = 0;
  // db[j] = beta * db[j] + sum over rows r of dy[r][j] (rows summed in order).
  virtual void ColumnSum(const Tensor& dy, float beta, Tensor db) = 0;
  // Softmax cross-entropy of logits (rows x classes) against labels (rows values). When
  // dlogits.data is non-null it receives (softmax - onehot) * grad_scale. Labels must be in
  // [0, classes).
  virtual LossSums SoftmaxCrossEntropy(const Tensor& logits, const IntTensor& labels,
                                       float grad_scale, Tensor dlogits) = 0;

  // Convolution support: cols gets one row per output pixel (batch*height*width rows) holding
  // the kernel x kernel x channels patch around it (zero outside the image; "same" padding).
  virtual void Im2Col(const Tensor& x, const ImageShape& shape, int kernel, Tensor cols) = 0;
  // The adjoint of Im2Col: dx = sum of the patch gradients in dcols over the pixels they cover.
  virtual void Col2Im(const Tensor& dcols, const ImageShape& shape, int kernel, Tensor dx) = 0;
  // 2x2 max pool with stride 2 (odd trailing rows/columns dropped). argmax receives, for each
  // output value, the index within its image's row of x that won (first maximum wins).
  virtual void MaxPool(const Tensor& x, const ImageShape& shape, Tensor y, IntTensor argmax) = 0;
  // dx = 0, then dx[argmax] += dy for every output value.
  virtual void MaxPoolBackward(const Tensor& dy, const IntTensor& argmax, Tensor dx) = 0;

  // SGD with momentum and L2 weight decay (PyTorch's formulation):
  // g' = g + wd*w; velocity = momentum*velocity + g'; w -= lr*velocity.
  virtual void SgdStep(Tensor w, const Tensor& g, Tensor velocity, const SgdHyper& h) = 0;
  // Adam with L2 weight decay (PyTorch's torch.optim.Adam): g' = g + wd*w;
  // m = b1*m + (1-b1)*g'; v = b2*v + (1-b2)*g'^2;
  // w -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps).
  virtual void AdamStep(Tensor w, const Tensor& g, Tensor m, Tensor v, const AdamHyper& h) = 0;

  // Waits for queued work; reports an asynchronous failure. The CPU backend is synchronous.
  virtual absl::Status Synchronize() { return absl::OkStatus(); }
};

inline void BackendDeleter::operator()(void* p) const {
  if (p != nullptr && backend != nullptr) backend->Release(p);
}

inline absl::StatusOr<Tensor> Backend::Readable(const float* host, int64_t rows, int64_t cols,
                                                Buffer* keep) {
  absl::StatusOr<Buffer> b = Allocate(rows, cols);
  if (!b.ok()) return b.status();
  *keep = *std::move(b);
  Upload(host, keep->view());
  return keep->view();
}

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_BACKEND_H_
