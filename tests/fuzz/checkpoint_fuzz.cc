// Fuzz target: the checkpoint reader. The input is written as the newest checkpoint file beside
// a valid older one: loading must either verify the input or skip it and return the older one.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include "common/checkpoint.h"

namespace {

const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/sextant-ckpt-fuzz-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d == nullptr) abort();
    std::string path = d;
    if (!sextant::WriteCheckpoint(path, 1, "good", 8).ok()) abort();
    return path;
  }();
  return dir;
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
  // The payload reader, over the raw input.
  sextant::ByteReader reader(input);
  for (int i = 0; i < 8 && !reader.done(); ++i) {
    if (!reader.U64().ok() || !reader.Bytes().ok()) break;
  }
  return 0;
}
