// The safetensors model file format: an 8-byte little-endian header length N, N bytes of JSON
// header, then the data buffer. The header maps each tensor name to
//   {"dtype": "F32"|"F16"|"BF16", "shape": [dims], "data_offsets": [begin, end]}
// (offsets relative to the start of the data buffer), plus an optional "__metadata__" object of
// string values. Read and written strictly, as the reference implementation does: the tensors
// tile the data buffer exactly, with no gaps, overlaps or trailing bytes.
#ifndef SEXTANT_TENSORS_SAFETENSORS_H_
#define SEXTANT_TENSORS_SAFETENSORS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "absl/strings/string_view.h"
#include "tensors/tensor_file.h"

namespace sextant {

// The largest JSON header read or written: 100 MB, the reference implementation's limit.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// The most dimensions a tensor's shape may have (the reference has no limit; no real model comes
// near it, and it bounds what a header can make the parser hold per tensor).
inline constexpr int kMaxSafetensorsRank = 64;

// Reads the model in `path`. Tensors come in the order of their data offsets, the metadata as
// stored. The header length and every offset are checked against the file's size before any
// buffer is sized from them, so no more than the file holds is read or allocated.
// InvalidArgument "PATH: ..." for a malformed file, naming the tensor where one is at fault:
// a header length over kMaxSafetensorsHeaderBytes or past the end of the file; a header that is
// not a JSON object; an unsupported dtype; a shape with a negative dim, more than
// kMaxSafetensorsRank dims or an element count that overflows; data_offsets that are not
// [begin, end] with begin <= end <= the data size, or whose length is not the shape's byte
// count; tensors that overlap, leave a gap or leave bytes unused; a duplicate name or key; an
// unknown key in a tensor's entry; metadata that is not an object of strings.
// NotFound / PermissionDenied "PATH: ..." when it cannot be opened.
absl::StatusOr<TensorFile> ReadSafetensors(const std::string& path);

// The layout of the model in `path`: its tensors as ReadSafetensors returns them (names, dtypes,
// shapes, order, metadata) but with empty data, read from the header alone, so a model of many
// gigabytes costs its header. The header and every offset are checked against the file's size
// exactly as ReadSafetensors checks them, with the same errors.
absl::StatusOr<TensorFile> ReadSafetensorsLayout(const std::string& path);

// The same as ReadSafetensors over a whole file's bytes already in memory; the messages carry
// no path.
absl::StatusOr<TensorFile> ParseSafetensors(absl::string_view bytes);

// The file's bytes: the header lists the metadata (when there is any) and then the tensors in
// `file` order, packed in that order; it is padded with spaces to a multiple of 8 bytes, as the
// reference writer does. InvalidArgument naming the tensor when a name is repeated, "__metadata__"
// or not UTF-8, a shape is invalid (see NumElements), data does not hold the
// shape's bytes, or the header would exceed kMaxSafetensorsHeaderBytes; also when metadata is
// not UTF-8.
absl::StatusOr<std::string> SerializeSafetensors(const TensorFile& file);

// Writes SerializeSafetensors(file) to `path` through a temporary file in the same directory
// that is fsynced and then renamed over `path`, so a reader sees the old file or the whole new
// one. The same InvalidArgument as SerializeSafetensors, with nothing written; an errno-based
// status "PATH: ..." (e.g. PermissionDenied, NotFound for a missing directory) on I/O errors.
absl::Status WriteSafetensors(const std::string& path, const TensorFile& file);

// Streaming forms for models of any size: memory stays O(one chunk), not the model's size.
//
// Writes the model whose tensors are `layout`'s (names, dtypes, shapes, metadata; data ignored)
// and whose values are `flat` (f32, in layout order), each narrowed to its tensor's dtype, to
// `path` as WriteSafetensors does (temporary file, fsync, rename), the same bytes as
// WriteSafetensors(UnflattenFromF32(layout, flat)). InvalidArgument when flat.size() is not the
// layout's element count, or as WriteSafetensors.
absl::Status WriteSafetensorsFromF32(const std::string& path, const TensorFile& layout,
                                     absl::Span<const float> flat);

// Reads the model in `path` into `out`, widened to f32 in `layout`'s tensor order (the file may
// list its tensors in any order). The file's header is checked as ReadSafetensorsLayout checks
// it, then against `layout` (CheckSameLayout, naming the tensor) before any data is read.
// InvalidArgument when out.size() is not the layout's element count; errors "PATH: ..." as
// ReadSafetensorsLayout.
absl::Status ReadSafetensorsToF32(const std::string& path, const TensorFile& layout,
                                  absl::Span<float> out);

}  // namespace sextant

#endif  // SEXTANT_TENSORS_SAFETENSORS_H_
