// Trainable models for 28x28x1 images and 10 classes (any image shape works): an MLP and a
// small CNN, written against Backend so that they run on the CPU or a GPU unchanged.
#ifndef SEXTANT_WORKER_TRAIN_MODEL_H_
#define SEXTANT_WORKER_TRAIN_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/train/backend.h"

namespace sextant::train {

struct ModelSpec {
  std::string kind = "mlp";  // "mlp" or "cnn". Default "mlp".
  // Input image shape; default 1x28x28. The CNN reads a row as height x width x channels
  // (channels innermost), which for one channel is the plain pixel order.
  int channels = 1, height = 28, width = 28;
  int classes = 10;  // Default 10.
  // Dense hidden layer widths (ReLU, then dropout). For "cnn" these follow the convolutions.
  // Default {512, 256}.
  std::vector<int> hidden = {512, 256};
  float dropout = 0;  // drop probability after each hidden activation, in [0, 1). Default 0.
  // "cnn" only: output channels of the two conv(kernel)-ReLU-maxpool(2x2) stages. Default {16, 32}.
  std::vector<int> conv_channels = {16, 32};
  int kernel = 3;  // "cnn" only: odd convolution kernel size ("same" padding). Default 3.

  int64_t inputs() const { return int64_t{channels} * height * width; }
};

// InvalidArgument naming the field when the spec is unusable (unknown kind, a width < 1,
// dropout outside [0, 1), an even kernel, an image too small for two pools, ...).
absl::Status ValidateModelSpec(const ModelSpec& spec);

// A network with its parameters, their gradients and its activation buffers, all in backend
// memory. Not thread-safe.
class Model {
 public:
  virtual ~Model() = default;

  // The parameters and the matching gradient buffers, in a fixed order (weights, then bias,
  // layer by layer). The views stay valid for the model's lifetime.
  virtual const std::vector<Tensor>& parameters() const = 0;
  virtual const std::vector<Tensor>& gradients() const = 0;
  int64_t parameter_count() const;

  // Bytes of activation buffers a micro-batch of `rows` examples needs (inputs included).
  virtual int64_t ActivationBytes(int64_t rows) const = 0;
  // Allocates activation buffers for micro-batches of up to `rows` examples, releasing the old
  // ones first. ResourceExhausted from the backend when they do not fit.
  virtual absl::Status Reserve(int64_t rows) = 0;
  // The largest micro-batch Reserve() has prepared for (0 before the first call).
  virtual int64_t reserved_rows() const = 0;

  // The input buffer for up to reserved_rows() examples (reserved_rows() x inputs); callers
  // upload a micro-batch into its first rows.
  virtual Tensor input() = 0;
  // Runs the first `rows` rows of input() forward and returns the logits (rows x classes).
  // When `training` and dropout > 0, masks are drawn from StreamKey(dropout_seed, layer, 0)
  // at counter positions offset by `row_offset` (the micro-batch's first row within its batch).
  virtual Tensor Forward(int64_t rows, bool training, uint64_t dropout_seed,
                         int64_t row_offset) = 0;
  // Backpropagates dlogits (the last Forward's rows x classes) and sets the gradients to
  // beta * gradients + this micro-batch's gradient (beta 0 for the first micro-batch of a
  // step, 1 to accumulate).
  virtual void Backward(const Tensor& dlogits, float beta) = 0;
};

// Builds the model of `spec` with He-normal weights for ReLU layers and Glorot-uniform weights
// for the output layer, drawn from counter_rng with `seed`; biases start at zero. Errors as
// ValidateModelSpec, or ResourceExhausted when the parameters do not fit.
absl::StatusOr<std::unique_ptr<Model>> NewModel(const ModelSpec& spec, Backend* backend,
                                                uint64_t seed);

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_MODEL_H_
