// Fuzz target: the federated run's global-model checkpoint
// (orchestrator/federated/global_checkpoint.h), read back on `sextant resume`. The input is written
// as the newest checkpoint beside a valid older one; the newest that verifies is decoded for a
// 4-float model. Decoding any payload must give a checkpoint or an error without allocating more
// than the model's size, and whatever decodes must encode back to the same payload (plus an empty
// row list for the older format).
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include "common/checkpoint.h"
#include "orchestrator/federated/global_checkpoint.h"

namespace {

constexpr size_t kModel = 4;

const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/sextant-global-ckpt-fuzz-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d == nullptr) abort();
    sextant::GlobalCheckpoint good;
    good.round = 1;
    good.model = {1, 2, 3, 4};
    if (!sextant::WriteCheckpoint(d, 1, sextant::EncodeGlobalCheckpoint(good)).ok()) abort();
    return std::string(d);
  }();
  return dir;
}

void Decode(const std::string& payload) {
  absl::StatusOr<sextant::GlobalCheckpoint> c = sextant::DecodeGlobalCheckpoint(payload, kModel);
  if (!c.ok()) return;
  if (c->model.size() != kModel || c->round < 0 || c->optimizer.rounds < 0) abort();
  for (const auto* m : {&c->optimizer.m, &c->optimizer.v}) {
    if (!m->empty() && m->size() != kModel) abort();
  }
  // Re-encoding is stable (a payload from before rows were added gains an empty row list).
  const std::string again = sextant::EncodeGlobalCheckpoint(*c);
  if (again != payload && again != payload + std::string(8, '\0')) abort();
  absl::StatusOr<sextant::GlobalCheckpoint> d = sextant::DecodeGlobalCheckpoint(again, kModel);
  if (!d.ok() || sextant::EncodeGlobalCheckpoint(*d) != again) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = Dir();
  std::string input(reinterpret_cast<const char*>(data), size);
  {
    std::ofstream f(dir + "/ckpt-2.bin", std::ios::binary | std::ios::trunc);
    f << input;
  }
  auto loaded = sextant::LoadLatestCheckpoint(dir);
  if (!loaded.ok()) abort();  // the valid older checkpoint is always there
  Decode(loaded->payload);
  Decode(input);  // the raw bytes as a payload, past the checksum
  return 0;
}
