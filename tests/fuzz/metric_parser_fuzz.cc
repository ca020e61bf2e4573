// Fuzz target: the stdout metric and event line parsers, one input line at a time.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/metric_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    (void)sextant::ParseMetricLine(line);
    sextant::EventLine event;
    (void)sextant::ParseEventLine(line, &event);
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return 0;
}
