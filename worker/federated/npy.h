#ifndef SEXTANT_WORKER_FEDERATED_NPY_H_
#define SEXTANT_WORKER_FEDERATED_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace sextant {

// A float32 array as numpy's .npy format holds it (format 1.0, little-endian '<f4', C order).
struct NpyArray {
  std::vector<int64_t> shape;  // () is a scalar; the product of the dims is data.size()
  std::vector<float> data;
};

// Writes `data` with `shape` (default: 1-D) to path as .npy 1.0, through a temporary file that
// is renamed into place. InvalidArgument when the shape's product is not data.size(); Internal
// on I/O errors.
absl::Status WriteNpy(const std::string& path, absl::Span<const float> data,
                      std::vector<int64_t> shape = {});

// Reads a .npy file strictly: magic, version 1.0/2.0/3.0, a header dict with exactly 'descr'
// '<f4' (or '=f4'/'|f4' on this little-endian host), 'fortran_order' False and a shape of
// non-negative ints, a header length that keeps the data 16- or 64-byte aligned as numpy writes
// it, and a file size equal to header + 4 * prod(shape). InvalidArgument names what is wrong
// (another dtype, Fortran order, a truncated or oversized file); NotFound when path is missing.
absl::StatusOr<NpyArray> ReadNpy(const std::string& path);

// The same checks on bytes already in memory.
absl::StatusOr<NpyArray> ParseNpy(const std::string& bytes);

}  // namespace sextant

#endif  // SEXTANT_WORKER_FEDERATED_NPY_H_
