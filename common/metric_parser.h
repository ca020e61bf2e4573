#ifndef SEXTANT_COMMON_METRIC_PARSER_H_
#define SEXTANT_COMMON_METRIC_PARSER_H_

#include <map>
#include <string>
#include <string_view>

namespace sextant {

// The metrics found on one stdout line.
struct ParsedLine {
  std::map<std::string, double> metrics;  // name -> value; NaN and +-Inf are kept as such
  int ignored_tokens = 0;                 // tokens with '=' that were not name=number
};

// Parses `name=value` tokens separated by whitespace or commas, e.g.
// "epoch=3 val_loss=0.412 accuracy=0.871". A name is [A-Za-z_][A-Za-z0-9_.:/-]*, at most 128
// chars. A value is a whole decimal or hex float, or nan/inf/-inf. Tokens without '=' are prose
// and are skipped silently; a later duplicate name wins. Never fails.
ParsedLine ParseMetricLine(std::string_view line);

// The prefix of an event line: "sextant-event: oom micro_batch=64" carries kind "oom" and
// message "micro_batch=64". Event lines are not parsed for metrics.
inline constexpr std::string_view kEventPrefix = "sextant-event:";

struct EventLine {
  std::string kind;     // [a-z0-9_]+, at most 64 chars
  std::string message;  // the rest of the line, trimmed, at most 1000 chars
};
// True and fills *out when line is a well-formed event line.
bool ParseEventLine(std::string_view line, EventLine* out);

}  // namespace sextant

#endif  // SEXTANT_COMMON_METRIC_PARSER_H_
