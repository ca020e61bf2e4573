#include "worker/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <dlfcn.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cuda/kernels.h"
#include "worker/train/accounted_backend.h"

namespace sextant::cuda {
namespace {

using train::AccountedBackend;
using train::Backend;
using train::Buffer;
using train::IntBuffer;
using train::IntTensor;
using train::Tensor;
using train::Transpose;

// cuBLAS and NCCL are loaded when a CUDA backend is first made, not when the binary starts:
// linking them would cost every sextant-worker start (also on machines without a GPU) the
// loading of a few hundred MB of libraries.
struct Libraries {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemv_v2) sgemv = nullptr;
  decltype(&ncclCommInitAll) nccl_init_all = nullptr;
  decltype(&ncclCommDestroy) nccl_destroy = nullptr;
  decltype(&ncclGroupStart) nccl_group_start = nullptr;
  decltype(&ncclGroupEnd) nccl_group_end = nullptr;
  decltype(&ncclAllReduce) nccl_all_reduce = nullptr;
  decltype(&ncclGetErrorString) nccl_error_string = nullptr;
  std::string cublas_error, nccl_error;  // why a library is unusable; empty when loaded
};

// The library by its soname (the loader's search path), else from the toolkit we built with.
void* Open(const char* soname) {
  void* lib = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
#ifdef SEXTANT_CUDA_LIBRARY_DIR
  if (lib == nullptr) {
    lib = ::dlopen(absl::StrCat(SEXTANT_CUDA_LIBRARY_DIR, "/", soname).c_str(),
                   RTLD_NOW | RTLD_LOCAL);
  }
#endif
  return lib;
}

template <typename F>
bool Resolve(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(::dlsym(lib, name));
  return *out != nullptr;
}

// Loaded once per process, then immutable.
const Libraries& Libs() {
  static const Libraries libs = [] {
    Libraries l;
    void* cublas = Open("libcublas.so.13");
    if (cublas == nullptr || !(Resolve(cublas, "cublasCreate_v2", &l.create) &&
                               Resolve(cublas, "cublasDestroy_v2", &l.destroy) &&
                               Resolve(cublas, "cublasSetStream_v2", &l.set_stream) &&
                               Resolve(cublas, "cublasSetMathMode", &l.set_math_mode) &&
                               Resolve(cublas, "cublasSgemm_v2", &l.sgemm) &&
                               Resolve(cublas, "cublasSgemv_v2", &l.sgemv))) {
      l.cublas_error = absl::StrCat("cannot load cuBLAS (libcublas.so.13): ", ::dlerror());
    }
    void* nccl = Open("libnccl.so.2");
    if (nccl == nullptr || !(Resolve(nccl, "ncclCommInitAll", &l.nccl_init_all) &&
                             Resolve(nccl, "ncclCommDestroy", &l.nccl_destroy) &&
                             Resolve(nccl, "ncclGroupStart", &l.nccl_group_start) &&
                             Resolve(nccl, "ncclGroupEnd", &l.nccl_group_end) &&
                             Resolve(nccl, "ncclAllReduce", &l.nccl_all_reduce) &&
                             Resolve(nccl, "ncclGetErrorString", &l.nccl_error_string))) {
      l.nccl_error = absl::StrCat("cannot load NCCL (libnccl.so.2): ", ::dlerror());
    }
    return l;
  }();
  return libs;
}

// The one checked boundary: a CUDA, cuBLAS or NCCL failure becomes a Status naming the call.
absl::Status CudaStatus(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

absl::Status CublasStatus(cublasStatus_t e, const char* what) {
  if (e == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": cuBLAS status ", static_cast<int>(e));
  if (e == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(msg);
  return absl::InternalError(msg);
}

#define SEXTANT_CUDA_CHECK(call) Record(CudaStatus((call), #call))
#define SEXTANT_CUBLAS_CHECK(call) Record(CublasStatus((call), #call))

// The backend's scratch memory on its device, each buffer grown on demand: a vector of ones
// (bias gradients as a GEMV) and the per-row loss and flags of the softmax cross-entropy.
// Called on the backend's device and stream; not thread-safe.
class DeviceScratch {
 public:
  // At least n ones; OK or the CUDA error.
  absl::Status EnsureOnes(int64_t n, cudaStream_t stream) {
    if (n <= ones_size_) return absl::OkStatus();
    if (ones != nullptr) {
      cudaStreamSynchronize(stream);
      cudaFree(ones);
      ones = nullptr;
    }
    SEXTANT_RETURN_IF_ERROR(CudaStatus(cudaMalloc(&ones, n * sizeof(float)), "cudaMalloc(ones)"));
    ones_size_ = n;
    return CudaStatus(LaunchFill(ones, n, 1.0f, stream), "LaunchFill(ones)");
  }
  // Room for n rows' loss and flags; OK or the CUDA error.
  absl::Status EnsureRows(int64_t n, cudaStream_t stream) {
    if (n <= rows_) return absl::OkStatus();
    cudaStreamSynchronize(stream);
    Free();
    SEXTANT_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(&row_loss, n * sizeof(double)), "cudaMalloc(row_loss)"));
    SEXTANT_RETURN_IF_ERROR(
        CudaStatus(cudaMalloc(&row_flags, n * sizeof(int32_t)), "cudaMalloc(row_flags)"));
    rows_ = n;
    return absl::OkStatus();
  }
  // Frees the row buffers, and with_ones the ones too (the backend's device is current).
  void Free(bool with_ones = false) {
    if (row_loss != nullptr) cudaFree(row_loss);
    if (row_flags != nullptr) cudaFree(row_flags);
    row_loss = nullptr;
    row_flags = nullptr;
    rows_ = 0;
    if (with_ones && ones != nullptr) {
      cudaFree(ones);
      ones = nullptr;
      ones_size_ = 0;
    }
  }

  float* ones = nullptr;
  double* row_loss = nullptr;
  int32_t* row_flags = nullptr;

 private:
  int64_t ones_size_ = 0;
  int64_t rows_ = 0;
};

class CudaBackend : public AccountedBackend {
 public:
  static absl::StatusOr<std::unique_ptr<Backend>> Create(const CudaBackendOptions& o) {
    int count = DeviceCount();
    if (o.device < 0 || o.device >= count) {
      return absl::UnavailableError(
          absl::StrCat("no CUDA device ", o.device, " (", count, " visible)"));
    }
    auto b = std::unique_ptr<CudaBackend>(new CudaBackend(o));
    if (absl::Status s = b->Init(); !s.ok()) return s;
    return std::unique_ptr<Backend>(std::move(b));
  }

  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    ReleaseAll();
    scratch_.Free(/*with_ones=*/true);
    if (cublas_ != nullptr) Libs().destroy(cublas_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  std::string name() const override { return absl::StrCat("cuda:", device_); }
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  void Upload(const float* host, Tensor dst) override {
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, dst.size() * sizeof(float),
                                       cudaMemcpyHostToDevice, stream_));
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host buffer may be reused at once
  }
  void UploadInts(const int32_t* host, IntTensor dst) override {
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(dst.data, host, dst.size * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream_));
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void Download(const Tensor& src, float* host) override {
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(host, src.data, src.size() * sizeof(float),
                                       cudaMemcpyDeviceToHost, stream_));
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void Fill(Tensor t, float value) override {
    SEXTANT_CUDA_CHECK(LaunchFill(t.data, t.size(), value, stream_));
  }
  void GatherRows(const Tensor& table, const IntTensor& index, Tensor dst) override {
    SEXTANT_CUDA_CHECK(
        LaunchGatherRows(table.data, index.data, index.size, table.cols, dst.data, stream_));
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap the operands.
  void Gemm(Transpose ta, Transpose tb, float alpha, const Tensor& a, const Tensor& b, float beta,
            Tensor c) override {
    const int m = static_cast<int>(c.rows), n = static_cast<int>(c.cols);
    const int k = static_cast<int>(ta == Transpose::kYes ? a.rows : a.cols);
    if (m == 0 || n == 0) return;
    SEXTANT_CUBLAS_CHECK(Libs().sgemm(cublas_, tb == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      ta == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k,
                                      &alpha, b.data, static_cast<int>(b.cols), a.data,
                                      static_cast<int>(a.cols), &beta, c.data, n));
  }

  void AddBias(Tensor x, const Tensor& bias, bool relu) override {
    SEXTANT_CUDA_CHECK(LaunchAddBias(x.data, bias.data, x.rows, x.cols, relu, stream_));
  }
  void ReluBackward(const Tensor& y, Tensor dy) override {
    SEXTANT_CUDA_CHECK(LaunchReluBackward(y.data, dy.data, dy.size(), stream_));
  }
  void Dropout(Tensor x, Tensor mask, float p, uint64_t key, int64_t row_offset) override {
    SEXTANT_CUDA_CHECK(
        LaunchDropout(x.data, mask.data, x.rows, x.cols, p, key, row_offset, stream_));
  }
  void Multiply(const Tensor& mask, Tensor dy) override {
    SEXTANT_CUDA_CHECK(LaunchMultiply(mask.data, dy.data, dy.size(), stream_));
  }

  // db = beta * db + dy^T 1: a GEMV against a vector of ones (deterministic, no atomics).
  void ColumnSum(const Tensor& dy, float beta, Tensor db) override {
    if (!Record(scratch_.EnsureOnes(dy.rows, stream_))) return;
    const float one = 1.0f;
    SEXTANT_CUBLAS_CHECK(Libs().sgemv(
        cublas_, CUBLAS_OP_N, static_cast<int>(dy.cols), static_cast<int>(dy.rows), &one, dy.data,
        static_cast<int>(dy.cols), scratch_.ones, 1, &beta, db.data, 1));
  }

  train::LossSums SoftmaxCrossEntropy(const Tensor& logits, const IntTensor& labels,
                                      float grad_scale, Tensor dlogits) override {
    train::LossSums sums;
    const int64_t rows = logits.rows;
    if (!Record(scratch_.EnsureRows(rows, stream_))) return sums;
    SEXTANT_CUDA_CHECK(LaunchSoftmaxCrossEntropy(logits.data, labels.data, rows, logits.cols,
                                                 grad_scale, dlogits.data, scratch_.row_loss,
                                                 scratch_.row_flags, stream_));
    host_loss_.resize(rows);
    host_flags_.resize(rows);
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(host_loss_.data(), scratch_.row_loss, rows * sizeof(double),
                                       cudaMemcpyDeviceToHost, stream_));
    SEXTANT_CUDA_CHECK(cudaMemcpyAsync(host_flags_.data(), scratch_.row_flags,
                                       rows * sizeof(int32_t), cudaMemcpyDeviceToHost, stream_));
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    // Summed on the host in row order, exactly as the CPU backend does.
    for (int64_t r = 0; r < rows; ++r) {
      if (host_flags_[r] & 2) {
        ++sums.nonfinite;
      } else {
        sums.loss += host_loss_[r];
      }
      sums.correct += host_flags_[r] & 1;
    }
    return sums;
  }

  void Im2Col(const Tensor& x, const train::ImageShape& s, int kernel, Tensor cols) override {
    SEXTANT_CUDA_CHECK(
        LaunchIm2Col(x.data, s.batch, s.height, s.width, s.channels, kernel, cols.data, stream_));
  }
  void Col2Im(const Tensor& dcols, const train::ImageShape& s, int kernel, Tensor dx) override {
    SEXTANT_CUDA_CHECK(
        LaunchCol2Im(dcols.data, s.batch, s.height, s.width, s.channels, kernel, dx.data, stream_));
  }
  void MaxPool(const Tensor& x, const train::ImageShape& s, Tensor y, IntTensor argmax) override {
    SEXTANT_CUDA_CHECK(LaunchMaxPool(x.data, s.batch, s.height, s.width, s.channels, y.data,
                                     argmax.data, stream_));
  }
  void MaxPoolBackward(const Tensor& dy, const IntTensor& argmax, Tensor dx) override {
    SEXTANT_CUDA_CHECK(
        LaunchMaxPoolBackward(dy.data, argmax.data, dy.rows, dy.cols, dx.cols, dx.data, stream_));
  }

  void SgdStep(Tensor w, const Tensor& g, Tensor vel, const train::SgdHyper& h) override {
    SEXTANT_CUDA_CHECK(LaunchSgdStep(w.data, g.data, vel.data, w.size(), h.lr, h.momentum,
                                     h.weight_decay, stream_));
  }

  void AdamStep(Tensor w, const Tensor& g, Tensor m, Tensor v, const train::AdamHyper& h) override {
    const double t = static_cast<double>(h.step);
    const float step_size = static_cast<float>(h.lr / (1.0 - std::pow(double{h.beta1}, t)));
    const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(double{h.beta2}, t)));
    SEXTANT_CUDA_CHECK(LaunchAdamStep(w.data, g.data, m.data, v.data, w.size(), step_size, bc2_sqrt,
                                      h.beta1, h.beta2, h.eps, h.weight_decay, stream_));
  }

  absl::Status Synchronize() override {
    SEXTANT_CUDA_CHECK(cudaStreamSynchronize(stream_));
    absl::Status s = error_;
    return s;
  }

 private:
  explicit CudaBackend(const CudaBackendOptions& o)
      : AccountedBackend(o.memory_limit_bytes), device_(o.device) {}

  absl::Status Init() {
    absl::Status s = CudaStatus(cudaSetDevice(device_), "cudaSetDevice");
    if (s.ok())
      s = CudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                     "cudaStreamCreate");
    if (s.ok() && !Libs().cublas_error.empty()) s = absl::UnavailableError(Libs().cublas_error);
    if (s.ok()) s = CublasStatus(Libs().create(&cublas_), "cublasCreate");
    if (s.ok()) s = CublasStatus(Libs().set_stream(cublas_, stream_), "cublasSetStream");
    // Plain FP32 (no TF32 tensor cores), so the GPU's results track the CPU backend's.
    if (s.ok()) {
      s = CublasStatus(Libs().set_math_mode(cublas_, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
    }
    if (!s.ok())
      return absl::UnavailableError(absl::StrCat("CUDA device ", device_, ": ", s.message()));
    return s;
  }

  // Keeps the first error for Synchronize(); true when s is OK.
  bool Record(absl::Status s) {
    if (s.ok()) return true;
    if (error_.ok()) error_ = std::move(s);
    return false;
  }

  absl::StatusOr<void*> RawAllocate(int64_t bytes) override {
    cudaSetDevice(device_);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 4)));
    if (e != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky; clear it
      return absl::ResourceExhaustedError(
          absl::StrCat(name(), ": cannot allocate ", bytes, " bytes: ", cudaGetErrorString(e)));
    }
    e = cudaMemsetAsync(p, 0, static_cast<size_t>(bytes), stream_);
    if (e != cudaSuccess) {
      cudaFree(p);
      return CudaStatus(e, "cudaMemset");
    }
    return p;
  }
  void RawFree(void* p) override {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);  // the memory may still be in use by queued kernels
    cudaFree(p);
  }

  const int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  absl::Status error_;
  DeviceScratch scratch_;
  std::vector<double> host_loss_;
  std::vector<int32_t> host_flags_;
};

class NcclAllReduce : public GradientAllReduce {
 public:
  static absl::StatusOr<std::unique_ptr<GradientAllReduce>> Create(
      const std::vector<Backend*>& replicas) {
    std::vector<CudaBackend*> cuda;
    std::vector<int> devices;
    for (Backend* b : replicas) {
      auto* c = dynamic_cast<CudaBackend*>(b);
      if (c == nullptr) return absl::InvalidArgumentError("NCCL all-reduce needs CUDA backends");
      cuda.push_back(c);
      devices.push_back(c->device());
    }
    if (cuda.empty()) return absl::InvalidArgumentError("no replicas");
    if (!Libs().nccl_error.empty()) return absl::UnavailableError(Libs().nccl_error);
    std::vector<ncclComm_t> comms(cuda.size());
    ncclResult_t r =
        Libs().nccl_init_all(comms.data(), static_cast<int>(comms.size()), devices.data());
    if (r != ncclSuccess) {
      return absl::UnavailableError(absl::StrCat("ncclCommInitAll: ", Libs().nccl_error_string(r)));
    }
    return std::unique_ptr<GradientAllReduce>(new NcclAllReduce(std::move(cuda), std::move(comms)));
  }

  ~NcclAllReduce() override {
    for (ncclComm_t c : comms_) Libs().nccl_destroy(c);
  }

  absl::Status SumInPlace(const std::vector<std::vector<Tensor>>& per_replica) override {
    if (per_replica.size() != replicas_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected ", replicas_.size(), " replicas' gradients, got ", per_replica.size()));
    }
    for (const auto& g : per_replica) {
      if (g.size() != per_replica[0].size())
        return absl::InvalidArgumentError("tensor counts differ");
      for (size_t i = 0; i < g.size(); ++i) {
        if (g[i].size() != per_replica[0][i].size()) {
          return absl::InvalidArgumentError(absl::StrCat("gradient ", i, " shapes differ"));
        }
      }
    }
    if (replicas_.size() == 1) return absl::OkStatus();
    ncclResult_t r = Libs().nccl_group_start();
    for (size_t i = 0; r == ncclSuccess && i < per_replica[0].size(); ++i) {
      for (size_t k = 0; r == ncclSuccess && k < replicas_.size(); ++k) {
        const Tensor& t = per_replica[k][i];
        r = Libs().nccl_all_reduce(t.data, t.data, static_cast<size_t>(t.size()), ncclFloat,
                                   ncclSum, comms_[k], replicas_[k]->stream());
      }
    }
    ncclResult_t end = Libs().nccl_group_end();
    if (r == ncclSuccess) r = end;
    if (r != ncclSuccess) {
      return absl::InternalError(absl::StrCat("ncclAllReduce: ", Libs().nccl_error_string(r)));
    }
    return absl::OkStatus();
  }

 private:
  NcclAllReduce(std::vector<CudaBackend*> replicas, std::vector<ncclComm_t> comms)
      : replicas_(std::move(replicas)), comms_(std::move(comms)) {}

  std::vector<CudaBackend*> replicas_;
  std::vector<ncclComm_t> comms_;
};

}  // namespace

int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

absl::StatusOr<std::unique_ptr<train::Backend>> NewCudaBackend(const CudaBackendOptions& options) {
  return CudaBackend::Create(options);
}

absl::StatusOr<std::unique_ptr<GradientAllReduce>> NewGradientAllReduce(
    const std::vector<train::Backend*>& replicas) {
  return NcclAllReduce::Create(replicas);
}

}  // namespace sextant::cuda
