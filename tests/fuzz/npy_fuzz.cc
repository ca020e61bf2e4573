// Fuzz target: the .npy reader (worker/federated/npy.h), the format of a command client's data
// share (the model itself travels as safetensors: safetensors_fuzz). Any input must parse or give
// an error, never a crash; an array that parses must write and read back bit for bit.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "worker/federated/npy.h"

namespace {

const std::string& Path() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/sextant-npy-fuzz-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d == nullptr) abort();
    return std::string(d) + "/model.npy";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<sextant::NpyArray> array = sextant::ParseNpy(bytes);
  if (!array.ok()) {
    if (array.status().message().empty()) abort();  // every refusal says why
    return 0;
  }
  uint64_t n = 1;
  for (int64_t d : array->shape) {
    if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) abort();
  }
  if (n != array->data.size()) abort();
  if (!sextant::WriteNpy(Path(), array->data, array->shape).ok()) return 0;
  absl::StatusOr<sextant::NpyArray> again = sextant::ReadNpy(Path());
  // WriteNpy writes a scalar () as the 1-D (1,) (its contract: an empty shape means 1-D).
  const std::vector<int64_t> shape = array->shape.empty() ? std::vector<int64_t>{1} : array->shape;
  if (!again.ok() || again->shape != shape || again->data.size() != array->data.size()) {
    abort();
  }
  if (!array->data.empty() && std::memcmp(again->data.data(), array->data.data(),
                                          array->data.size() * sizeof(float)) != 0) {
    abort();
  }
  return 0;
}
