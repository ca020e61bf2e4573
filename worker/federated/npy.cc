#include "worker/federated/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace sextant {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// Large enough for any model we stream; a header or shape beyond it is corrupt.
constexpr size_t kMaxHeaderBytes = 1 << 16;

std::string ShapeText(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

absl::Status Bad(absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("not a float32 .npy file: ", why));
}

// The value of key in numpy's header dict, as written by numpy: {'descr': '<f4', ...}.
absl::StatusOr<std::string> DictValue(absl::string_view dict, absl::string_view key) {
  const std::string quoted = absl::StrCat("'", key, "':");
  size_t at = dict.find(quoted);
  if (at == absl::string_view::npos) return Bad(absl::StrCat("the header has no '", key, "'"));
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(dict.substr(at + quoted.size()));
  if (rest.empty()) return Bad(absl::StrCat("no value for '", key, "'"));
  size_t end = rest.front() == '(' ? rest.find(')') + 1 : rest.find_first_of(",}");
  if (end == absl::string_view::npos || end == 0) return Bad(absl::StrCat("bad '", key, "'"));
  return std::string(absl::StripAsciiWhitespace(rest.substr(0, end)));
}

absl::StatusOr<std::vector<int64_t>> ParseShape(absl::string_view text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return Bad("bad shape");
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(text.substr(1, text.size() - 2), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;  // "(5,)" and "()"
    int64_t dim = 0;
    if (!absl::SimpleAtoi(part, &dim) || dim < 0) return Bad(absl::StrCat("bad shape ", text));
    shape.push_back(dim);
  }
  return shape;
}

}  // namespace

absl::Status WriteNpy(const std::string& path, absl::Span<const float> data,
                      std::vector<int64_t> shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(data.size())};
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != static_cast<int64_t>(data.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape ", ShapeText(shape), " holds ", n, " values, not ", data.size()));
  }
  std::string header =
      absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': ", ShapeText(shape), ", }");
  // numpy pads with spaces and ends with '\n' so that the data starts 64-byte aligned.
  const size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  if (header.size() > 0xffff) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape of ", shape.size(), " dimensions does not fit a .npy 1.0 header"));
  }
  const uint16_t len = static_cast<uint16_t>(header.size());
  const std::string prefix = absl::StrCat(absl::string_view(kMagic, kMagicLen),
                                          absl::string_view("\x01\x00", 2),
                                          std::string{static_cast<char>(len & 0xff),
                                                      static_cast<char>(len >> 8)},
                                          header);
  // The command client's exchange with its command, remade each round: no restart reads it.
  return WriteFileAtomically(
      path,
      [&](int fd, const std::string& tmp) {
        SEXTANT_RETURN_IF_ERROR(WriteAllToFd(fd, prefix, tmp));
        return WriteAllToFd(fd,
                            absl::string_view(reinterpret_cast<const char*>(data.data()),
                                              data.size() * sizeof(float)),
                            tmp);
      },
      AtomicWriteOptions{0644, /*sync=*/false});
}

absl::StatusOr<NpyArray> ParseNpy(const std::string& bytes) {
  if (bytes.size() < kMagicLen + 4 || bytes.compare(0, kMagicLen, kMagic, kMagicLen) != 0) {
    return Bad("no \\x93NUMPY magic");
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3 || bytes[7] != 0) {
    return Bad(absl::StrCat("unsupported version ", major, ".", static_cast<int>(bytes[7])));
  }
  size_t len = 0, start = 0;
  if (major == 1) {
    len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    start = 10;
  } else {
    if (bytes.size() < 12) return Bad("truncated header length");
    for (int i = 3; i >= 0; --i) len = len << 8 | static_cast<unsigned char>(bytes[8 + i]);
    start = 12;
  }
  if (len == 0 || len > kMaxHeaderBytes || start + len > bytes.size()) {
    return Bad("truncated header");
  }
  if ((start + len) % 16 != 0) return Bad("the data is not aligned as numpy writes it");
  absl::string_view dict(bytes.data() + start, len);
  if (dict.back() != '\n') return Bad("the header does not end with a newline");
  dict = absl::StripAsciiWhitespace(dict);
  if (dict.size() < 2 || dict.front() != '{' || dict.back() != '}') return Bad("no header dict");
  auto descr = DictValue(dict, "descr");
  if (!descr.ok()) return descr.status();
  if (*descr != "'<f4'" && *descr != "'=f4'" && *descr != "'|f4'") {
    return Bad(absl::StrCat("dtype ", *descr, "; expected '<f4' (float32)"));
  }
  auto fortran = DictValue(dict, "fortran_order");
  if (!fortran.ok()) return fortran.status();
  if (*fortran != "False") return Bad("Fortran order; save a C-contiguous array");
  auto shape_text = DictValue(dict, "shape");
  if (!shape_text.ok()) return shape_text.status();
  auto shape = ParseShape(*shape_text);
  if (!shape.ok()) return shape.status();
  // Three keys and nothing else (a count of ':' outside the shape).
  if (std::count(dict.begin(), dict.end(), ':') != 3) return Bad("unexpected keys in the header");
  uint64_t n = 1;
  for (int64_t d : *shape) {
    if (d != 0 && n > (uint64_t{1} << 40) / static_cast<uint64_t>(d)) return Bad("shape too large");
    n *= static_cast<uint64_t>(d);
  }
  const size_t data_bytes = bytes.size() - start - len;
  if (data_bytes != n * sizeof(float)) {
    return Bad(absl::StrCat("shape ", *shape_text, " needs ", n * sizeof(float),
                            " data bytes, the file has ", data_bytes));
  }
  NpyArray out;
  out.shape = *std::move(shape);
  out.data.resize(n);
  if (data_bytes > 0) std::memcpy(out.data.data(), bytes.data() + start + len, data_bytes);
  return out;
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  absl::StatusOr<NpyArray> out = ParseNpy(buf.str());
  if (!out.ok())
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", out.status().message()));
  return out;
}

}  // namespace sextant
