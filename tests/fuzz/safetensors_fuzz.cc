// Fuzz target: the safetensors model-file reader (tensors/safetensors.h), through which a
// client's model comes in. Any input must parse or be refused with InvalidArgument and a message,
// never crash or allocate past what the input holds. A file that parses must tile its bytes,
// widen to f32 and narrow back, serialise, and read back to the same tensors; read from a file
// instead of memory, it must give the same result.
#include <stdlib.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tensors/safetensors.h"

namespace {

const std::string& Path() {
  static const std::string path = [] {
    char tmpl[] = "/tmp/sextant-safetensors-fuzz-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d == nullptr) abort();
    return std::string(d) + "/model.safetensors";
  }();
  return path;
}

bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  }
  return true;
}

bool SameFile(const sextant::TensorFile& a, const sextant::TensorFile& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const sextant::Tensor& x = a.tensors[i];
    const sextant::Tensor& y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.data != y.data) {
      return false;
    }
  }
  return true;
}

// Each tensor's bytes match its shape; widening to f32 and narrowing back keeps every value.
void CheckTensors(const sextant::TensorFile& file, size_t input_size) {
  size_t total = 0;
  for (const sextant::Tensor& t : file.tensors) {
    const std::optional<int64_t> n = sextant::NumElements(t.shape);
    if (!n || t.data.size() != static_cast<size_t>(*n) * sextant::DTypeSize(t.dtype)) abort();
    total += t.data.size();
    absl::StatusOr<std::vector<float>> values = t.ToF32();
    if (!values.ok()) abort();
    sextant::Tensor copy = t;
    if (!copy.SetFromF32(*values).ok()) abort();
    absl::StatusOr<std::vector<float>> again = copy.ToF32();
    if (!again.ok() || !SameFloats(*values, *again)) abort();
  }
  if (total > input_size) abort();
  if (!sextant::CheckSameLayout(file, file).ok()) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<sextant::TensorFile> file = sextant::ParseSafetensors(bytes);
  {
    std::ofstream f(Path(), std::ios::binary | std::ios::trunc);
    f << bytes;
  }
  absl::StatusOr<sextant::TensorFile> from_file = sextant::ReadSafetensors(Path());
  if (!file.ok()) {
    // Every refusal says why, and the file reader refuses the same way, after the path.
    if (file.status().code() != absl::StatusCode::kInvalidArgument) abort();
    if (file.status().message().empty()) abort();
    if (from_file.status().message() != absl::StrCat(Path(), ": ", file.status().message())) {
      abort();
    }
    return 0;
  }
  if (!from_file.ok() || !SameFile(*file, *from_file)) abort();
  CheckTensors(*file, size);
  absl::StatusOr<std::string> written = sextant::SerializeSafetensors(*file);
  if (!written.ok()) abort();  // what was read can always be written
  absl::StatusOr<sextant::TensorFile> back = sextant::ParseSafetensors(*written);
  if (!back.ok() || !SameFile(*file, *back)) abort();
  return 0;
}
