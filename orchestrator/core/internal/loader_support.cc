#include "orchestrator/core/internal/loader_support.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/duration.h"
#include "common/ids.h"

namespace sextant::loader_internal {
namespace {

int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diag = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      const int up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// What users of other tuners write for our keys. Spelling distance alone maps Optuna's `low`
// to `log`, which is wrong in a way that costs more than no suggestion at all.
// The first entry for a key whose translation is allowed where it was written wins.
constexpr std::array<std::pair<absl::string_view, absl::string_view>, 12> kForeignKeys = {{
    {"low", "min"},                 // Optuna
    {"high", "max"},                // Optuna
    {"lower", "min"},               // Ray Tune
    {"upper", "max"},               // Ray Tune
    {"choices", "values"},          // Optuna
    {"q", "step"},                  // Ray Tune, Hyperopt
    {"direction", "goal"},          // Optuna, inside objective:
    {"direction", "objective"},     // Optuna, at the top level
    {"directions", "objectives"},   // Optuna
    {"n_trials", "max_trials"},     // Optuna
    {"n_jobs", "max_concurrent"},   // Optuna
    {"num_samples", "max_trials"},  // Ray Tune
}};

// Keys that other tuners write at the top level and Sextant keeps in a section.
constexpr std::array<std::pair<absl::string_view, absl::string_view>, 6> kSectionKeys = {{
    {"n_trials", "search.max_trials"},  // Optuna
    {"max_trials", "search.max_trials"},
    {"n_jobs", "search.max_concurrent"},  // Optuna
    {"max_concurrent", "search.max_concurrent"},
    {"sampler", "search.sampler"},
    {"seed", "search.seed"},
}};

// Where a top-level `key` belongs ("search.max_trials"), or "".
absl::string_view SectionOf(absl::string_view key) {
  for (const auto& [foreign, where] : kSectionKeys) {
    if (key == foreign) return where;
  }
  return "";
}

// How Sextant writes a value other tuners use (Optuna's and Hyperopt's distribution names for a
// parameter's type), or "".
absl::string_view ForeignValue(absl::string_view value) {
  static constexpr std::array<std::pair<absl::string_view, absl::string_view>, 6> kValues = {{
      {"loguniform", "type: float with log: true"},
      {"uniform", "type: float"},
      {"discrete_uniform", "type: float with step"},
      {"int_uniform", "type: int"},
      {"randint", "type: int"},
      {"choice", "type: categorical"},
  }};
  for (const auto& [foreign, ours] : kValues) {
    if (value == foreign) return ours;
  }
  return "";
}

// The allowed key another tuner calls `key`, else the allowed key closest in spelling, else "".
absl::string_view Suggestion(absl::string_view key, absl::Span<const absl::string_view> allowed) {
  for (const auto& [foreign, ours] : kForeignKeys) {
    if (key == foreign && std::find(allowed.begin(), allowed.end(), ours) != allowed.end()) {
      return ours;
    }
  }
  return Nearest(key, allowed);
}

}  // namespace

Pos PosOf(const YAML::Node& node) {
  if (!node.IsDefined()) return {};
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0 || mark.column < 0) return {};
  return {mark.line + 1, mark.column + 1};
}

Pos KeyPos(const Field& f) {
  const Pos p = PosOf(f.key);
  return p.line > 0 ? p : PosOf(f.value);
}

Pos ValuePos(const Field& f) {
  if (!f.value.IsNull()) {
    const Pos p = PosOf(f.value);
    if (p.line > 0) return p;
  }
  return KeyPos(f);
}

std::string Join(absl::string_view parent, absl::string_view key) {
  return parent.empty() ? std::string(key) : absl::StrCat(parent, ".", key);
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      return absl::StrCat("'", s.size() > 40 ? s.substr(0, 40) + "..." : s, "'");
    }
    default:
      return "no value";
  }
}

absl::string_view Nearest(absl::string_view key, absl::Span<const absl::string_view> allowed) {
  absl::string_view best;
  int best_distance = key.size() >= 5 ? 2 : 1;
  for (absl::string_view a : allowed) {
    const int d = EditDistance(key, a);
    if (d <= best_distance && (best.empty() || d < best_distance)) {
      best = a;
      best_distance = d;
    }
  }
  return best;
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string WorkingDir(const std::string& file, const std::string& given) {
  if (!given.empty() && given[0] == '/') return given;
  const size_t slash = file.rfind('/');
  const std::string folder =
      slash == std::string::npos ? "." : file.substr(0, std::max<size_t>(slash, 1));
  if (given.empty()) return folder;
  return folder == "." ? given : absl::StrCat(folder, folder == "/" ? "" : "/", given);
}

void Reader::Error(Pos pos, absl::string_view path, absl::string_view message) {
  errors_.push_back({file_, pos.line, pos.col,
                     path.empty() ? std::string(message) : absl::StrCat(path, ": ", message)});
}

void Reader::KeyError(const Field& f, absl::string_view message) {
  Error(KeyPos(f), f.path, message);
}

void Reader::ValueError(const Field& f, absl::string_view message) {
  Error(ValuePos(f), f.path, message);
}

std::vector<Field> Reader::Entries(const Field& f) {
  std::vector<Field> out;
  if (!f.value.IsMap()) {
    ValueError(f, absl::StrCat("expected a mapping, got ", Describe(f.value)));
    return out;
  }
  std::set<std::string> seen;
  for (const auto& kv : f.value) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) {
      Error(PosOf(key), f.path, "keys must be plain strings");
      continue;
    }
    Field entry(Join(f.path, key.Scalar()), key, kv.second);
    if (!seen.insert(key.Scalar()).second) {
      KeyError(entry, "duplicate key");
      continue;
    }
    out.push_back(entry);
  }
  return out;
}

std::vector<Field> Reader::Elements(const Field& f) {
  std::vector<Field> out;
  if (!f.value.IsSequence()) {
    ValueError(f, absl::StrCat("expected a list, got ", Describe(f.value)));
    return out;
  }
  for (size_t i = 0; i < f.value.size(); ++i) {
    out.emplace_back(absl::StrCat(f.path, "[", i, "]"), YAML::Node(), f.value[i]);
  }
  return out;
}

std::optional<std::string> Reader::String(const Field& f) {
  if (f.value.IsScalar()) return f.value.Scalar();
  ValueError(f, absl::StrCat("expected a string, got ", Describe(f.value)));
  return std::nullopt;
}

std::optional<std::string> Reader::NonEmptyString(const Field& f) {
  std::optional<std::string> s = String(f);
  if (s && s->empty()) {
    ValueError(f, "must not be empty");
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> Reader::IdString(const Field& f, const char* what) {
  std::optional<std::string> v = NonEmptyString(f);
  if (v && !IsValidId(*v)) {
    ValueError(f, absl::StrCat(QuotedId(*v), " is not ", what, ": at most ", kMaxIdBytes,
                               " bytes of [A-Za-z0-9._-]"));
    return std::nullopt;
  }
  return v;
}

std::optional<double> Reader::Number(const Field& f) {
  double v = 0;
  if (f.value.IsScalar() && absl::SimpleAtod(f.value.Scalar(), &v) && std::isfinite(v)) {
    return v;
  }
  ValueError(f, absl::StrCat("expected a number, got ", Describe(f.value)));
  return std::nullopt;
}

std::optional<double> Reader::NumberAbove(const Field& f, double lo, bool strict) {
  std::optional<double> v = Number(f);
  if (v && (strict ? !(*v > lo) : !(*v >= lo))) {
    ValueError(f, absl::StrCat("must be ", strict ? "> " : ">= ", lo, ", got ", f.value.Scalar()));
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> Reader::Integer(const Field& f, int64_t lo, int64_t hi) {
  std::optional<int64_t> v = ParseInteger(f);
  if (!v) return std::nullopt;
  if (*v < lo || *v > hi) {
    ValueError(f, *v < lo ? absl::StrCat("must be >= ", lo, ", got ", *v)
                          : absl::StrCat("must be <= ", hi, ", got ", *v));
    return std::nullopt;
  }
  return v;
}

std::optional<uint64_t> Reader::Unsigned(const Field& f) {
  uint64_t v = 0;
  if (f.value.IsScalar() && absl::SimpleAtoi(f.value.Scalar(), &v)) return v;
  ValueError(f, absl::StrCat("expected a non-negative integer, got ", Describe(f.value)));
  return std::nullopt;
}

std::optional<bool> Reader::Bool(const Field& f) {
  bool v = false;
  if (f.value.IsScalar() && YAML::convert<bool>::decode(f.value, v)) return v;
  ValueError(f, absl::StrCat("expected true or false, got ", Describe(f.value)));
  return std::nullopt;
}

std::optional<double> Reader::Duration(const Field& f) {
  std::optional<std::string> s = String(f);
  if (!s) return std::nullopt;
  absl::StatusOr<double> seconds = ParseDurationSeconds(*s);
  if (!seconds.ok()) {
    ValueError(f, seconds.status().message());
    return std::nullopt;
  }
  return *seconds;
}

std::optional<size_t> Reader::Choice(const Field& f, std::span<const absl::string_view> names) {
  std::optional<std::string> s = String(f);
  if (!s) return std::nullopt;
  for (size_t i = 0; i < names.size(); ++i) {
    if (*s == names[i]) return i;
  }
  std::string message =
      absl::StrCat("unknown ", f.key.IsDefined() && f.key.IsScalar() ? f.key.Scalar() : "value",
                   " '", *s, "'; expected one of ", absl::StrJoin(names, ", "));
  if (absl::string_view ours = ForeignValue(*s); !ours.empty()) {
    absl::StrAppend(&message, " (for '", *s, "' write ", ours, ")");
  }
  ValueError(f, message);
  return std::nullopt;
}

std::optional<int64_t> Reader::ParseInteger(const Field& f) {
  if (f.value.IsScalar()) {
    int64_t i = 0;
    if (absl::SimpleAtoi(f.value.Scalar(), &i)) return i;
    double d = 0;
    if (absl::SimpleAtod(f.value.Scalar(), &d) && std::isfinite(d)) {
      if (d == std::floor(d) && std::fabs(d) <= static_cast<double>(kMaxExactInt)) {
        return static_cast<int64_t>(d);
      }
      ValueError(f, absl::StrCat("must be an integer, got ", f.value.Scalar()));
      return std::nullopt;
    }
  }
  ValueError(f, absl::StrCat("expected an integer, got ", Describe(f.value)));
  return std::nullopt;
}

Section::Section(Reader& r, const Field& field, const std::vector<absl::string_view>& allowed)
    : r_(r), field_(field), ok_(field.value.IsMap()), entries_(r.Entries(field)) {
  for (const Field& e : entries_) {
    const std::string& key = e.key.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string message = absl::StrCat("unknown key; allowed keys: ", absl::StrJoin(allowed, ", "));
    if (absl::string_view where = SectionOf(key); !where.empty() && field_.path.empty()) {
      absl::StrAppend(&message, " (did you mean ", where, "? it belongs under ",
                      where.substr(0, where.find('.')), ":)");
    } else if (absl::string_view near = Suggestion(key, allowed); !near.empty()) {
      absl::StrAppend(&message, " (did you mean '", near, "'?)");
    }
    r_.KeyError(e, message);
  }
}

const Field* Section::Find(absl::string_view key) const {
  for (const Field& e : entries_) {
    if (e.key.Scalar() == key) return &e;
  }
  return nullptr;
}

const Field* Section::Require(absl::string_view key) const {
  const Field* f = Find(key);
  if (f == nullptr && ok_)
    r_.Error(KeyPos(field_), Join(field_.path, key), "required key is missing");
  return f;
}

}  // namespace sextant::loader_internal
