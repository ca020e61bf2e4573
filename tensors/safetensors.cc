#include "tensors/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"
#include "tensors/dtype.h"
#include "tensors/internal/header.h"

namespace sextant {
namespace {

constexpr uint64_t kLengthBytes = 8;

uint64_t LoadU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);  // little-endian host (static_assert in dtype.cc)
  return v;
}

// The header's length from the first 8 bytes of a `total`-byte file, checked before anything
// is sized from it.
absl::StatusOr<uint64_t> HeaderLength(const char* first8, uint64_t total) {
  const uint64_t n = LoadU64(first8);
  if (n > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the header length ", n, " is over the limit of ", kMaxSafetensorsHeaderBytes));
  }
  if (n > total - kLengthBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the header length ", n, " goes past the end of the ", total, "-byte file"));
  }
  return n;
}

absl::Status TooShort(uint64_t total) {
  return absl::InvalidArgumentError(
      absl::StrCat("the ", total, "-byte file is too short for the 8-byte header length"));
}

// `what` and the current errno's text, under the code errno maps to (NotFound, ...).
absl::Status Errno(absl::string_view what) { return absl::ErrnoToStatus(errno, what); }

// The same, prefixed with "PATH: " (errno is read before the message is built).
absl::Status Errno(const std::string& path, absl::string_view what) {
  const int err = errno;
  return absl::ErrnoToStatus(err, absl::StrCat(path, ": ", what));
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now, reporting the error close() returns (for a file just written).
  int Close() { return ::close(std::exchange(fd_, -1)); }

 private:
  int fd_;
};

// Reads exactly `size` bytes at `offset`; InvalidArgument when the file ends first.
absl::Status ReadAt(int fd, char* out, uint64_t size, uint64_t offset) {
  while (size > 0) {
    const ssize_t got = ::pread(fd, out, size, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Errno("cannot read");
    if (got == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the file ended at byte ", offset, " (was it changed while read?)"));
    }
    out += got;
    size -= static_cast<uint64_t>(got);
    offset += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

// The tensors of `header`, each data buffer filled by read(begin, out).
template <typename ReadFn>
absl::StatusOr<TensorFile> Assemble(internal::Header header, ReadFn read) {
  TensorFile file;
  file.metadata = std::move(header.metadata);
  file.tensors.reserve(header.entries.size());
  for (internal::HeaderEntry& e : header.entries) {
    Tensor t;
    t.name = std::move(e.name);
    t.dtype = e.dtype;
    t.shape = std::move(e.shape);
    t.data.resize(e.end - e.begin);  // within the actual data buffer: ParseHeader checked it
    SEXTANT_RETURN_IF_ERROR(read(e.begin, t.data));
    file.tensors.push_back(std::move(t));
  }
  return file;
}

// The header of the open file, checked against its size; *data_start is where the data buffer
// begins. The errors carry no path.
absl::StatusOr<internal::Header> ReadOpenHeader(int fd, uint64_t* data_start) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return Errno("cannot stat");
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError("not a regular file");
  const uint64_t total = static_cast<uint64_t>(st.st_size);
  if (total < kLengthBytes) return TooShort(total);
  char first8[kLengthBytes];
  SEXTANT_RETURN_IF_ERROR(ReadAt(fd, first8, kLengthBytes, 0));
  SEXTANT_ASSIGN_OR_RETURN(const uint64_t n, HeaderLength(first8, total));
  std::string json(n, '\0');
  SEXTANT_RETURN_IF_ERROR(ReadAt(fd, json.data(), n, kLengthBytes));
  *data_start = kLengthBytes + n;
  return internal::ParseHeader(json, total - *data_start);
}

// Reads the open file; the errors carry no path.
absl::StatusOr<TensorFile> ReadOpen(int fd) {
  uint64_t data_start = 0;
  SEXTANT_ASSIGN_OR_RETURN(internal::Header header, ReadOpenHeader(fd, &data_start));
  return Assemble(std::move(header), [&](uint64_t begin, std::string& out) {
    return ReadAt(fd, out.data(), out.size(), data_start + begin);
  });
}

// The open file's tensors with empty data; the errors carry no path.
absl::StatusOr<TensorFile> ReadOpenLayout(int fd) {
  uint64_t data_start = 0;
  SEXTANT_ASSIGN_OR_RETURN(internal::Header header, ReadOpenHeader(fd, &data_start));
  TensorFile file;
  file.metadata = std::move(header.metadata);
  file.tensors.reserve(header.entries.size());
  for (internal::HeaderEntry& e : header.entries) {
    file.tensors.push_back(Tensor{std::move(e.name), e.dtype, std::move(e.shape), {}});
  }
  return file;
}

// `read` applied to `path` opened for reading, its errors prefixed with "PATH: ".
template <typename ReadFn>
absl::StatusOr<TensorFile> ReadPath(const std::string& path, ReadFn read) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (ReadOpenHeader then refuses it);
  // reads of a regular file ignore the flag.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return Errno(path, "cannot open");
  absl::StatusOr<TensorFile> file = read(fd.get());
  if (!file.ok()) {
    return absl::Status(file.status().code(), absl::StrCat(path, ": ", file.status().message()));
  }
  return file;
}

// Writes `path` atomically (WriteFileAtomically): the length and header, then the data buffer
// that write_data(fd, tmp) writes.
template <typename WriteData>
absl::Status WriteAtomically(const std::string& path, const std::string& header,
                             WriteData write_data) {
  return WriteFileAtomically(path, [&](int fd, const std::string& tmp) -> absl::Status {
    char length[kLengthBytes];
    const uint64_t n = header.size();
    std::memcpy(length, &n, sizeof n);
    SEXTANT_RETURN_IF_ERROR(WriteAllToFd(fd, absl::string_view(length, kLengthBytes), tmp));
    SEXTANT_RETURN_IF_ERROR(WriteAllToFd(fd, header, tmp));
    return write_data(fd, tmp);
  });
}

// Elements converted per write or read of the streaming forms (4 MB of f32).
constexpr size_t kStreamElements = size_t{1} << 20;

}  // namespace

absl::StatusOr<TensorFile> ReadSafetensors(const std::string& path) {
  return ReadPath(path, ReadOpen);
}

absl::StatusOr<TensorFile> ReadSafetensorsLayout(const std::string& path) {
  return ReadPath(path, ReadOpenLayout);
}

absl::StatusOr<TensorFile> ParseSafetensors(absl::string_view bytes) {
  if (bytes.size() < kLengthBytes) return TooShort(bytes.size());
  SEXTANT_ASSIGN_OR_RETURN(const uint64_t n, HeaderLength(bytes.data(), bytes.size()));
  const absl::string_view data = bytes.substr(kLengthBytes + n);
  SEXTANT_ASSIGN_OR_RETURN(internal::Header header,
                           internal::ParseHeader(bytes.substr(kLengthBytes, n), data.size()));
  return Assemble(std::move(header), [&](uint64_t begin, std::string& out) {
    if (!out.empty()) std::memcpy(out.data(), data.data() + begin, out.size());
    return absl::OkStatus();
  });
}

absl::StatusOr<std::string> SerializeSafetensors(const TensorFile& file) {
  SEXTANT_ASSIGN_OR_RETURN(const std::string header, internal::BuildHeader(file));
  std::string out(kLengthBytes, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, sizeof n);
  out += header;
  for (const Tensor& t : file.tensors) out += t.data;
  return out;
}

absl::Status WriteSafetensors(const std::string& path, const TensorFile& file) {
  SEXTANT_ASSIGN_OR_RETURN(const std::string header, internal::BuildHeader(file));
  return WriteAtomically(path, header, [&](int fd, const std::string& tmp) {
    for (const Tensor& t : file.tensors) SEXTANT_RETURN_IF_ERROR(WriteAllToFd(fd, t.data, tmp));
    return absl::OkStatus();
  });
}

absl::Status WriteSafetensorsFromF32(const std::string& path, const TensorFile& layout,
                                     absl::Span<const float> flat) {
  SEXTANT_ASSIGN_OR_RETURN(const int64_t elements, LayoutElements(layout));
  if (static_cast<uint64_t>(elements) != flat.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", flat.size(),
                                                   " values for a layout of ", elements));
  }
  SEXTANT_ASSIGN_OR_RETURN(const std::string header,
                           internal::BuildHeader(layout, /*layout_only=*/true));
  return WriteAtomically(path, header, [&](int fd, const std::string& tmp) {
    std::string bytes;
    size_t at = 0;
    for (const Tensor& t : layout.tensors) {
      const size_t n = static_cast<size_t>(*NumElements(t.shape));  // LayoutElements checked
      for (size_t done = 0; done < n;) {
        const size_t k = std::min(kStreamElements, n - done);
        bytes.resize(k * DTypeSize(t.dtype));
        if (absl::Status s = EncodeFromF32(t.dtype, flat.subspan(at + done, k),
                                           absl::MakeSpan(bytes.data(), bytes.size()));
            !s.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": tensor \"", t.name, "\": ", s.message()));
        }
        SEXTANT_RETURN_IF_ERROR(WriteAllToFd(fd, bytes, tmp));
        done += k;
      }
      at += n;
    }
    return absl::OkStatus();
  });
}

absl::Status ReadSafetensorsToF32(const std::string& path, const TensorFile& layout,
                                  absl::Span<float> out) {
  SEXTANT_ASSIGN_OR_RETURN(const int64_t elements, LayoutElements(layout));
  if (static_cast<uint64_t>(elements) != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": room for ", out.size(),
                                                   " values for a layout of ", elements));
  }
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) return Errno(path, "cannot open");
  auto prefixed = [&](const absl::Status& s) {
    return s.ok() ? s : absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  };
  uint64_t data_start = 0;
  absl::StatusOr<internal::Header> header = ReadOpenHeader(fd.get(), &data_start);
  if (!header.ok()) return prefixed(header.status());
  TensorFile file_layout;
  for (const internal::HeaderEntry& e : header->entries) {
    file_layout.tensors.push_back(Tensor{e.name, e.dtype, e.shape, {}});
  }
  SEXTANT_RETURN_IF_ERROR(prefixed(CheckSameLayout(file_layout, layout)));
  absl::flat_hash_map<absl::string_view, const internal::HeaderEntry*> by_name;
  for (const internal::HeaderEntry& e : header->entries) by_name[e.name] = &e;
  std::string bytes;
  size_t at = 0;
  for (const Tensor& t : layout.tensors) {
    const internal::HeaderEntry& e = *by_name.at(t.name);
    const size_t n = static_cast<size_t>(*NumElements(t.shape));
    const size_t width = DTypeSize(t.dtype);
    for (size_t done = 0; done < n;) {
      const size_t k = std::min(kStreamElements, n - done);
      bytes.resize(k * width);
      SEXTANT_RETURN_IF_ERROR(
          prefixed(ReadAt(fd.get(), bytes.data(), bytes.size(), data_start + e.begin + done * width)));
      SEXTANT_RETURN_IF_ERROR(DecodeToF32(t.dtype, absl::MakeConstSpan(bytes.data(), bytes.size()),
                                          out.subspan(at + done, k)));
      done += k;
    }
    at += n;
  }
  return absl::OkStatus();
}

}  // namespace sextant
