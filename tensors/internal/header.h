// The safetensors JSON header: parsed and checked against the size of the data buffer it
// describes, and built for a model to be written. Private to tensors/.
#ifndef SEXTANT_TENSORS_INTERNAL_HEADER_H_
#define SEXTANT_TENSORS_INTERNAL_HEADER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tensors/dtype.h"
#include "tensors/tensor_file.h"

namespace sextant::internal {

// One tensor's entry: where its bytes lie in the data buffer.
struct HeaderEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct Header {
  std::vector<HeaderEntry> entries;  // by data offset, then name; they tile [0, data_size)
  std::map<std::string, std::string> metadata;
};

// Parses `json` (the N header bytes) for a data buffer of `data_size` bytes, with every check
// ReadSafetensors lists. InvalidArgument without a path prefix.
absl::StatusOr<Header> ParseHeader(absl::string_view json, uint64_t data_size);

// The JSON header for `file` (checked as SerializeSafetensors says), padded with spaces to a
// multiple of 8 bytes; the data buffer is the tensors' bytes in `file` order. layout_only: the
// tensors' data is ignored (a layout), each one's bytes are its dtype's size times its shape's
// element count.
absl::StatusOr<std::string> BuildHeader(const TensorFile& file, bool layout_only = false);

}  // namespace sextant::internal

#endif  // SEXTANT_TENSORS_INTERNAL_HEADER_H_
