#include "orchestrator/import/internal/yaml_scalar.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sextant {
namespace {

// The length of the valid UTF-8 sequence at s[i] (overlong forms, surrogates and code points
// past U+10FFFF are invalid), or 0; *cp receives its code point.
size_t Utf8Sequence(absl::string_view s, size_t i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  size_t n;
  uint32_t min;
  if ((b & 0xE0) == 0xC0) {
    n = 2, min = 0x80, *cp = b & 0x1F;
  } else if ((b & 0xF0) == 0xE0) {
    n = 3, min = 0x800, *cp = b & 0x0F;
  } else if ((b & 0xF8) == 0xF0) {
    n = 4, min = 0x10000, *cp = b & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (byte(i + k) & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return n;
}

std::string Escaped(absl::string_view s, bool quotes) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = Utf8Sequence(s, i, &cp);
    if (n == 0) {
      out += "\\uFFFD";
      ++i;
      continue;
    }
    switch (cp) {
      case '\\':
        out += quotes ? "\\\\" : "\\";
        break;
      case '"':
        out += quotes ? "\\\"" : "\"";
        break;
      case '\0':
        out += "\\0";
        break;
      case '\a':
        out += "\\a";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\v':
        out += "\\v";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\r':
        out += "\\r";
        break;
      case 0x1B:
        out += "\\e";
        break;
      default:
        if (cp < 0x20 || cp == 0x7F) {
          absl::StrAppendFormat(&out, "\\x%02X", cp);
        } else if ((cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029) {
          // Not \N, \L, \P: yaml-cpp 0.7 reads \N back as the lone byte 0x85, not UTF-8.
          absl::StrAppendFormat(&out, "\\u%04X", cp);
        } else {
          out.append(s.data() + i, n);
        }
    }
    i += n;
  }
  return out;
}

}  // namespace

bool IsUtf8(absl::string_view s) {
  uint32_t cp;
  for (size_t i = 0, n; i < s.size(); i += n) {
    if ((n = Utf8Sequence(s, i, &cp)) == 0) return false;
  }
  return true;
}

std::string YamlEscaped(absl::string_view s) { return Escaped(s, /*quotes=*/true); }

std::string YamlCommentText(absl::string_view s) { return Escaped(s, /*quotes=*/false); }

std::string YamlQuoted(absl::string_view s) { return absl::StrCat("\"", YamlEscaped(s), "\""); }

std::string YamlKey(absl::string_view s) {
  bool plain =
      !s.empty() && !(s[0] >= '0' && s[0] <= '9') && s != "null" && s != "Null" && s != "NULL";
  for (char c : s) {
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_');
  }
  return plain ? std::string(s) : YamlQuoted(s);
}

}  // namespace sextant
