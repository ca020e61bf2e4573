#include "common/metric_parser.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <system_error>

#include "absl/strings/ascii.h"

namespace sextant {
namespace {

constexpr size_t kMaxNameLength = 128;

// absl::EqualsIgnoreCase would do, but this absl's string_view is not std::string_view.
bool EqualsIgnoreCase(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (absl::ascii_tolower(static_cast<unsigned char>(text[i])) != lower[i]) return false;
  }
  return true;
}

bool IsSeparator(char c) { return c == ',' || absl::ascii_isspace(static_cast<unsigned char>(c)); }

bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == ':' ||
         c == '/' || c == '-';
}

bool IsValidName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  if (!absl::ascii_isalpha(static_cast<unsigned char>(name[0])) && name[0] != '_') return false;
  for (char c : name) {
    if (!IsNameChar(c)) return false;
  }
  return true;
}

// from_chars leaves the value untouched on overflow or underflow; strtod saturates to +-inf or
// rounds towards zero, which is what a metric of 1e999 or 1e-400 should become. The token is
// already known to be a well-formed number here.
double SaturatedValue(std::string_view token) {
  return std::strtod(std::string(token).c_str(), nullptr);
}

// Parses a whole token as a number; nullopt when any of it is not part of the number.
std::optional<double> ParseNumber(std::string_view token) {
  std::string_view text = token;
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (EqualsIgnoreCase(text, "nan")) return std::numeric_limits<double>::quiet_NaN();
  if (EqualsIgnoreCase(text, "inf")) {
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  }
  // from_chars has no sign or "0x" handling of its own, and would accept "inf"/"nan" spellings
  // that the contract does not; so the first character must start the digits.
  std::chars_format format = std::chars_format::general;
  bool hex = text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
  if (hex) {
    format = std::chars_format::hex;
    text.remove_prefix(2);
  }
  if (text.empty()) return std::nullopt;
  unsigned char first = static_cast<unsigned char>(text[0]);
  bool digit = hex ? absl::ascii_isxdigit(first) : absl::ascii_isdigit(first);
  if (!digit && first != '.') return std::nullopt;

  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, format);
  if (end != text.data() + text.size()) return std::nullopt;
  if (ec == std::errc::result_out_of_range) return SaturatedValue(token);
  if (ec != std::errc()) return std::nullopt;
  return negative ? -value : value;
}

void ParseToken(std::string_view token, ParsedLine& out) {
  size_t eq = token.find('=');
  if (eq == std::string_view::npos) return;
  std::string_view name = token.substr(0, eq);
  std::optional<double> value = ParseNumber(token.substr(eq + 1));
  if (!IsValidName(name) || !value.has_value()) {
    ++out.ignored_tokens;
    return;
  }
  out.metrics[std::string(name)] = *value;
}

}  // namespace

ParsedLine ParseMetricLine(std::string_view line) {
  ParsedLine out;
  // Most stdout lines are prose; skip them without tokenising.
  if (line.find('=') == std::string_view::npos) return out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsSeparator(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !IsSeparator(line[i])) ++i;
    if (i > start) ParseToken(line.substr(start, i - start), out);
  }
  return out;
}

}  // namespace sextant

namespace sextant {

bool ParseEventLine(std::string_view line, EventLine* out) {
  if (line.substr(0, kEventPrefix.size()) != kEventPrefix) return false;
  line.remove_prefix(kEventPrefix.size());
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
      s.remove_suffix(1);
    return s;
  };
  line = trim(line);
  size_t end = 0;
  while (end < line.size() && end < 64 &&
         ((line[end] >= 'a' && line[end] <= 'z') || (line[end] >= '0' && line[end] <= '9') ||
          line[end] == '_')) {
    ++end;
  }
  if (end == 0 || (end < line.size() && line[end] != ' ' && line[end] != '\t')) return false;
  out->kind = std::string(line.substr(0, end));
  std::string_view rest = trim(line.substr(end));
  out->message = std::string(rest.substr(0, 1000));
  return true;
}

}  // namespace sextant
