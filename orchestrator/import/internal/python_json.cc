#include "orchestrator/import/internal/python_json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

using OJson = nlohmann::ordered_json;

// nlohmann's parser knows no NaN or Infinity. Each such word outside strings becomes `null`,
// and its value is remembered by its ordinal among all the text's nulls: the parser reports
// values in text order, so the callback can tell the k-th null back into what it was.
struct Rewritten {
  std::string text;
  std::vector<bool> special;        // by ordinal among nulls: was NaN or an Infinity
  std::vector<double> null_values;  // by the same ordinal: its value (0 for a real null)
};

bool Word(absl::string_view text, size_t i, absl::string_view word) {
  return text.substr(i, word.size()) == word;
}

Rewritten Rewrite(absl::string_view text) {
  Rewritten out;
  out.text.reserve(text.size());
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (Word(text, i, "null")) {
      out.special.push_back(false);
      out.null_values.push_back(0);
      out.text += "null";
      i += 4;
      continue;
    } else {
      double v = 0;
      size_t n = 0;
      if (Word(text, i, "NaN")) {
        v = std::numeric_limits<double>::quiet_NaN(), n = 3;
      } else if (Word(text, i, "Infinity")) {
        v = std::numeric_limits<double>::infinity(), n = 8;
      } else if (Word(text, i, "-Infinity")) {
        v = -std::numeric_limits<double>::infinity(), n = 9;
      }
      if (n > 0) {
        out.special.push_back(true);
        out.null_values.push_back(v);
        out.text += "null";
        i += n;
        continue;
      }
    }
    out.text += c;
    ++i;
  }
  return out;
}

}  // namespace

int JsonDepth(absl::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

absl::StatusOr<OJson> ParsePythonJson(absl::string_view text) {
  const Rewritten r = Rewrite(text);
  size_t nulls = 0;
  auto restore = [&](int, OJson::parse_event_t event, OJson& parsed) {
    if (event == OJson::parse_event_t::value && parsed.is_null()) {
      if (nulls < r.special.size() && r.special[nulls]) parsed = r.null_values[nulls];
      ++nulls;
    }
    return true;
  };
  try {
    return OJson::parse(r.text, restore);
  } catch (const OJson::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("not JSON (", e.what(), ")"));
  }
}

std::string DumpPythonJson(const OJson& j) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) {
    const double v = j.get<double>();
    return std::isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity";
  }
  if (j.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < j.size(); ++i)
      absl::StrAppend(&out, i ? ", " : "", DumpPythonJson(j[i]));
    return out + "]";
  }
  if (j.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : j.items()) {
      absl::StrAppend(&out, first ? "" : ", ", OJson(k).dump(), ": ", DumpPythonJson(v));
      first = false;
    }
    return out + "}";
  }
  return j.dump();
}

bool HoldsNonFinite(const OJson& j) {
  if (j.is_number_float()) return !std::isfinite(j.get<double>());
  if (!j.is_structured()) return false;
  return std::any_of(j.begin(), j.end(), [](const OJson& v) { return HoldsNonFinite(v); });
}

}  // namespace sextant
