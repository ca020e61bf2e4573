// A model as named tensors: what a safetensors file holds (tensors/safetensors.h reads and writes
// it), with the conversions aggregation needs and the check that two models can be combined.
#ifndef SEXTANT_TENSORS_TENSOR_FILE_H_
#define SEXTANT_TENSORS_TENSOR_FILE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tensors/dtype.h"

namespace sextant {

// One named tensor: dtype, shape and its raw little-endian bytes in C (row-major) order.
struct Tensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // [] is a scalar (one element); a 0 dim means no elements
  std::string data;            // NumElements(shape) * DTypeSize(dtype) bytes

  // The values widened to f32 (exact for every dtype). InvalidArgument naming the tensor when
  // the shape is invalid (see NumElements) or data holds another number of bytes.
  absl::StatusOr<std::vector<float>> ToF32() const;

  // Replaces data with `values` narrowed to this tensor's dtype (round to nearest even for
  // F16/BF16); dtype and shape are kept. InvalidArgument naming the tensor, with data unchanged,
  // when values.size() is not the shape's element count.
  absl::Status SetFromF32(absl::Span<const float> values);
};

// The number of elements of `shape` (1 for []), or nullopt when a dim is negative or the count,
// times 4 bytes, does not fit in int64.
std::optional<int64_t> NumElements(absl::Span<const int64_t> shape);

// "[128,784]": a shape as error messages print it.
std::string ShapeText(absl::Span<const int64_t> shape);

// A model: tensors in file order (a file read back keeps the order of its data offsets; empty
// tensors at the same offset come by name) and the file's optional string metadata. Names are
// unique in a valid file.
struct TensorFile {
  std::vector<Tensor> tensors;
  std::map<std::string, std::string> metadata;

  // The tensor called `name`, or nullptr. Linear in the number of tensors.
  const Tensor* Find(absl::string_view name) const;
};

// A model's layout is a TensorFile whose tensors' data is ignored (usually empty): the names,
// dtypes and shapes, in order. A model travels flat: its tensors widened to f32 and concatenated
// in layout order, so that elementwise arithmetic on the flat vector is per-tensor f32 arithmetic
// whatever the storage dtypes.

// The element count of all of `layout`'s tensors together (from their shapes). InvalidArgument
// naming the tensor whose shape is invalid, or when the total overflows int64.
absl::StatusOr<int64_t> LayoutElements(const TensorFile& layout);

// The element count of each of `layout`'s tensors, in order: the segments of a flat model that
// an int8 update scales one by one (federation/update_codec.h) and that secure aggregation
// quantises each in its own range (federation/secure_quantizer.h). A tensor whose shape is
// invalid counts 0 (LayoutElements refuses such a layout).
std::vector<int64_t> LayoutSegments(const TensorFile& layout);

// `model`'s values widened to f32 and concatenated in tensor order. Errors as Tensor::ToF32.
absl::StatusOr<std::vector<float>> FlattenToF32(const TensorFile& model);

// `layout`'s tensors (names, dtypes, shapes and metadata) holding consecutive slices of `flat`,
// each narrowed to its tensor's dtype. InvalidArgument when flat.size() is not
// LayoutElements(layout), or as LayoutElements.
absl::StatusOr<TensorFile> UnflattenFromF32(const TensorFile& layout, absl::Span<const float> flat);

// OK when `model` has exactly the tensor names of `reference`, each with the same dtype and shape
// (the order of tensors may differ). Otherwise InvalidArgument naming the first offending tensor
// of `model` in its order, then the first missing one of `reference`, e.g.
//   tensor "fc1.weight": shape [128,784] where the global model has [128,785]
//   tensor "fc1.weight": dtype F16 where the global model has F32
//   tensor "fc1.w" is not in the global model (renamed from "fc1.weight"?)
//   tensor "fc2.bias" of the global model is missing
//   tensor "fc1.bias" appears twice
// where "the global model" is `reference_name`.
absl::Status CheckSameLayout(const TensorFile& model, const TensorFile& reference,
                             absl::string_view reference_name = "the global model");

}  // namespace sextant

#endif  // SEXTANT_TENSORS_TENSOR_FILE_H_
