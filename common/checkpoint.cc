#include "common/checkpoint.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/status_macros.h"

namespace sextant {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'S', 'X', 'C', 'K', 'P', 'T', '0', '1'};
constexpr size_t kHashBytes = 32;
constexpr size_t kHeaderBytes = sizeof(kMagic) + 8 + 8 + kHashBytes;  // magic, step, length, hash

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::string Hash(const std::string& payload) {
  std::string h(kHashBytes, '\0');
  crypto_generichash(reinterpret_cast<unsigned char*>(h.data()), kHashBytes,
                     reinterpret_cast<const unsigned char*>(payload.data()), payload.size(),
                     nullptr, 0);
  return h;
}

// Checkpoint files in `dir` as (step, path), newest first.
std::vector<std::pair<int64_t, std::string>> ListCheckpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) != 0 || name.size() <= 9 ||
        name.compare(name.size() - 4, 4, ".bin") != 0) {
      continue;
    }
    int64_t step;
    if (!absl::SimpleAtoi(name.substr(5, name.size() - 9), &step)) continue;
    out.emplace_back(step, entry.path().string());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

absl::StatusOr<Checkpoint> ReadOne(int64_t step, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  if (bytes.size() < kHeaderBytes || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": not a checkpoint or truncated header"));
  }
  uint64_t stored_step = GetU64(bytes.data() + 8);
  uint64_t length = GetU64(bytes.data() + 16);
  if (static_cast<int64_t>(stored_step) != step) {
    return absl::DataLossError(
        absl::StrCat(path, ": header step ", stored_step, " does not match the file name"));
  }
  if (bytes.size() - kHeaderBytes != length) {
    return absl::DataLossError(absl::StrCat(path, ": truncated (", bytes.size() - kHeaderBytes,
                                            " of ", length, " payload bytes)"));
  }
  Checkpoint c;
  c.step = step;
  c.path = path;
  c.payload = bytes.substr(kHeaderBytes);
  if (Hash(c.payload) != bytes.substr(24, kHashBytes)) {
    return absl::DataLossError(absl::StrCat(path, ": checksum mismatch"));
  }
  return c;
}

}  // namespace

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int64_t step,
                                            const std::string& payload, int keep) {
  const absl::string_view piece = payload;
  return WriteCheckpoint(dir, step, absl::MakeConstSpan(&piece, 1), keep);
}

absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int64_t step,
                                            absl::Span<const absl::string_view> payload,
                                            int keep) {
  if (sodium_init() < 0) return absl::InternalError("libsodium failed to initialise");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("checkpoint directory ", dir, " cannot be created: ", ec.message()));
  }
  std::string header(kMagic, sizeof(kMagic));
  PutU64(&header, static_cast<uint64_t>(step));
  uint64_t length = 0;
  crypto_generichash_state hash;
  crypto_generichash_init(&hash, nullptr, 0, kHashBytes);
  for (absl::string_view piece : payload) {
    length += piece.size();
    crypto_generichash_update(&hash, reinterpret_cast<const unsigned char*>(piece.data()),
                              piece.size());
  }
  std::string digest(kHashBytes, '\0');
  crypto_generichash_final(&hash, reinterpret_cast<unsigned char*>(digest.data()), kHashBytes);
  PutU64(&header, length);
  header += digest;
  std::string path = absl::StrCat(dir, "/ckpt-", step, ".bin");
  absl::Status s = WriteFileAtomically(path, [&](int fd, const std::string& tmp) {
    SEXTANT_RETURN_IF_ERROR(WriteAllToFd(fd, header, tmp));
    for (absl::string_view piece : payload) SEXTANT_RETURN_IF_ERROR(WriteAllToFd(fd, piece, tmp));
    return absl::OkStatus();
  });
  if (absl::IsPermissionDenied(s)) {
    return absl::PermissionDeniedError(
        absl::StrCat("checkpoint directory ", dir, " is not writable: ", s.message()));
  }
  if (!s.ok()) return s;
  auto all = ListCheckpoints(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) {
    fs::remove(all[i].second, ec);
  }
  return path;
}

absl::StatusOr<Checkpoint> LoadLatestCheckpoint(const std::string& dir) {
  if (sodium_init() < 0) return absl::InternalError("libsodium failed to initialise");
  std::vector<std::string> skipped;
  for (const auto& [step, path] : ListCheckpoints(dir)) {
    auto c = ReadOne(step, path);
    if (c.ok()) {
      c->skipped = std::move(skipped);
      return c;
    }
    skipped.push_back(std::string(c.status().message()));
  }
  std::string why = skipped.empty() ? "" : absl::StrCat(" (rejected: ", skipped.back(), ")");
  return absl::NotFoundError(absl::StrCat("no valid checkpoint in ", dir, why));
}

void ByteWriter::U64(uint64_t v) { PutU64(&out_, v); }

void ByteWriter::F64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  U64(bits);
}

void ByteWriter::Floats(const float* data, int64_t n) {
  U64(static_cast<uint64_t>(n));
  // An empty vector's data() may be null, which memcpy must never see (even for 0 bytes).
  if (n > 0) {
    out_.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n) * sizeof(float));
  }
}

void ByteWriter::Bytes(const std::string& s) {
  U64(s.size());
  out_ += s;
}

absl::StatusOr<uint64_t> ByteReader::U64() {
  if (in_.size() - pos_ < 8) return absl::DataLossError("checkpoint payload is too short");
  uint64_t v = GetU64(in_.data() + pos_);
  pos_ += 8;
  return v;
}

absl::StatusOr<int64_t> ByteReader::I64() {
  auto v = U64();
  if (!v.ok()) return v.status();
  return static_cast<int64_t>(*v);
}

absl::StatusOr<double> ByteReader::F64() {
  auto v = U64();
  if (!v.ok()) return v.status();
  double d;
  std::memcpy(&d, &*v, sizeof(d));
  return d;
}

absl::Status ByteReader::Floats(float* data, int64_t n) {
  auto len = U64();
  if (!len.ok()) return len.status();
  if (*len != static_cast<uint64_t>(n)) {
    return absl::DataLossError(
        absl::StrCat("checkpoint holds ", *len, " values where ", n, " were expected"));
  }
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  if (in_.size() - pos_ < bytes) return absl::DataLossError("checkpoint payload is too short");
  if (bytes > 0) std::memcpy(data, in_.data() + pos_, bytes);
  pos_ += bytes;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ByteReader::Bytes() {
  auto len = U64();
  if (!len.ok()) return len.status();
  if (in_.size() - pos_ < *len) return absl::DataLossError("checkpoint payload is too short");
  std::string s = in_.substr(pos_, *len);
  pos_ += *len;
  return s;
}

}  // namespace sextant
