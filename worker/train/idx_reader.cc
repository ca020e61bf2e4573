#include "worker/train/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace sextant::train {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 31;

// Reads the whole file, inflating it when it starts with the gzip magic bytes.
absl::StatusOr<std::string> ReadMaybeGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");  // gzread passes plain files through unchanged
  if (f == nullptr) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  gzbuffer(f, 1 << 17);
  std::string out;
  char buf[1 << 16];
  while (true) {
    int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int code = 0;
      std::string why = gzerror(f, &code);
      gzclose(f);
      return absl::DataLossError(absl::StrCat(path, ": corrupt gzip data: ", why));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  // A truncated gzip stream reads as a short file; gzclose_r reports Z_BUF_ERROR for it.
  int rc = gzclose(f);
  if (rc != Z_OK) {
    return absl::DataLossError(absl::StrCat(path, ": truncated or corrupt gzip stream"));
  }
  return out;
}

uint32_t BigEndian32(const std::string& s, size_t at) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data() + at);
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdx(const std::string& path, int expected_rank) {
  auto bytes = ReadMaybeGzip(path);
  if (!bytes.ok()) return bytes.status();
  const std::string& s = *bytes;
  if (s.size() < 4 || s[0] != 0 || s[1] != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not an IDX file (bad magic number)"));
  }
  if (static_cast<unsigned char>(s[2]) != 0x08) {
    return absl::DataLossError(absl::StrCat(path, ": IDX element type 0x",
                                            absl::Hex(static_cast<unsigned char>(s[2])),
                                            " is not unsigned byte (0x08)"));
  }
  int rank = static_cast<unsigned char>(s[3]);
  if (rank != expected_rank) {
    return absl::DataLossError(
        absl::StrCat(path, ": IDX rank ", rank, ", expected ", expected_rank));
  }
  size_t header = 4 + 4 * static_cast<size_t>(rank);
  if (s.size() < header) {
    return absl::DataLossError(absl::StrCat(path, ": truncated IDX header"));
  }
  IdxArray out;
  int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    int64_t d = BigEndian32(s, 4 + 4 * i);
    if (d == 0 || d >= kMaxDim) {
      return absl::DataLossError(absl::StrCat(path, ": IDX dimension ", i, " is ", d));
    }
    out.dims.push_back(d);
    count *= d;
    if (count >= kMaxDim * 16) {
      return absl::DataLossError(absl::StrCat(path, ": IDX array too large"));
    }
  }
  int64_t payload = static_cast<int64_t>(s.size() - header);
  if (payload != count) {
    return absl::DataLossError(
        absl::StrCat(path, ": IDX header says ", count, " bytes of data, file has ", payload));
  }
  out.data.assign(s.begin() + static_cast<std::ptrdiff_t>(header), s.end());
  return out;
}

}  // namespace sextant::train
