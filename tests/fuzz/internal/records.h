// Splits a fuzz input into records for the RPC harnesses: each record is one tag byte, a
// little-endian 16-bit length and that many bytes (cut short at the end of the input). The tag
// says what to do with the bytes (which RPC, which request flags); the bytes are parsed as the
// request proto, so that libFuzzer mutates real wire-format messages.
#ifndef SEXTANT_TESTS_FUZZ_INTERNAL_RECORDS_H_
#define SEXTANT_TESTS_FUZZ_INTERNAL_RECORDS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sextant::fuzz {

struct Record {
  uint8_t tag = 0;
  std::string bytes;
};

// At most max_records records, so that one input stays cheap.
inline std::vector<Record> SplitRecords(const uint8_t* data, size_t size, size_t max_records = 64) {
  std::vector<Record> out;
  size_t at = 0;
  while (at < size && out.size() < max_records) {
    Record r;
    r.tag = data[at++];
    size_t len = 0;
    if (at < size) len = data[at++];
    if (at < size) len |= static_cast<size_t>(data[at++]) << 8;
    if (len > size - at) len = size - at;
    r.bytes.assign(reinterpret_cast<const char*>(data + at), len);
    at += len;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace sextant::fuzz

#endif  // SEXTANT_TESTS_FUZZ_INTERNAL_RECORDS_H_
