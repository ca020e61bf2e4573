// Atomic, checksummed checkpoint files: write to a temporary file, fsync, rename, fsync the
// directory. A torn or corrupt file is detected on load, and the previous checkpoint is used.
#ifndef SEXTANT_COMMON_CHECKPOINT_H_
#define SEXTANT_COMMON_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace sextant {

// A loaded checkpoint: its position and the opaque payload the trainer serialised.
struct Checkpoint {
  int64_t step = 0;
  std::string path;
  std::string payload;
  std::vector<std::string> skipped;  // newer files rejected as corrupt, with the reason
};

// Writes `payload` as `dir/ckpt-<step>.bin` (header: magic, version, step, length, BLAKE2b-256
// of the payload) and then deletes all but the newest `keep` (default 2) checkpoints.
// The directory is created if missing. Returns the path, or an error naming the directory
// (e.g. PermissionDenied "checkpoint directory X is not writable: ...").
absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int64_t step,
                                            const std::string& payload, int keep = 2);
// The same with the payload given as consecutive pieces, hashed and written in order but never
// joined: a payload that holds a large model (a view of it) costs no second copy.
absl::StatusOr<std::string> WriteCheckpoint(const std::string& dir, int64_t step,
                                            absl::Span<const absl::string_view> payload,
                                            int keep = 2);

// The newest checkpoint in `dir` whose header and checksum verify; corrupt or truncated newer
// ones are listed in `skipped`. NotFound when the directory holds no valid checkpoint.
absl::StatusOr<Checkpoint> LoadLatestCheckpoint(const std::string& dir);

// Little-endian append-only serialisation for payloads.
class ByteWriter {
 public:
  void U64(uint64_t v);
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v);
  void Floats(const float* data, int64_t n);  // length-prefixed
  void Bytes(const std::string& s);           // length-prefixed
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// Reads what ByteWriter wrote, in the same order. Each getter returns DataLoss on a short read
// or a length mismatch, so a payload from another model shape is rejected, not misread.
class ByteReader {
 public:
  explicit ByteReader(const std::string& in) : in_(in) {}
  absl::StatusOr<uint64_t> U64();
  absl::StatusOr<int64_t> I64();
  absl::StatusOr<double> F64();
  absl::Status Floats(float* data, int64_t n);  // fails unless the stored length equals n
  absl::StatusOr<std::string> Bytes();
  bool done() const { return pos_ == in_.size(); }

 private:
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace sextant

#endif  // SEXTANT_COMMON_CHECKPOINT_H_
