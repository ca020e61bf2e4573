// Reader for the IDX format of MNIST-style datasets, gzip-compressed or plain.
#ifndef SEXTANT_WORKER_TRAIN_IDX_READER_H_
#define SEXTANT_WORKER_TRAIN_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sextant::train {

// One IDX array of unsigned bytes (type code 0x08).
struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28} or {60000}
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

// Reads `path` (gzip detected by its magic bytes). `expected_rank` is 3 for images and 1 for
// labels. DataLoss naming the file on a bad magic number, a rank or type mismatch, a dimension of
// zero or above 2^31, or a payload shorter or longer than the header says; NotFound when absent.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path, int expected_rank);

}  // namespace sextant::train

#endif  // SEXTANT_WORKER_TRAIN_IDX_READER_H_
