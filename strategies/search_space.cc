#include "strategies/search_space.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "strategies/internal/domain.h"

namespace sextant {
namespace {

using internal::IntRange;
using internal::IntRangeOf;
using internal::Levels;
using internal::LevelsOf;
using internal::UsesLog;

// The largest double below 1. Results are clamped to the domain too, since u * n can still
// round up to n for a large slice count n.
constexpr double kBelowOne = 0x1.fffffffffffffp-1;

double ClampUnit(double u) {
  if (!(u >= 0)) return 0;  // also catches NaN
  return std::min(u, kBelowOne);
}

// Log ints are log-uniform over [lo - 1/2, hi + 1/2] and then rounded, so every integer keeps
// a slice of its own (lo >= 1 whenever UsesLog holds, keeping the lower edge positive).
struct LogIntScale {
  double log_lo;
  double log_hi;
};

LogIntScale LogIntScaleOf(const IntRange& range) {
  return {std::log(static_cast<double>(range.lo) - 0.5),
          std::log(static_cast<double>(range.hi) + 0.5)};
}

// Equal slices of the unit interval, one per level.
ParamValue LevelFromUnit(const ParamSpec& spec, const Levels& levels, double u) {
  return internal::LevelValue(
      spec, levels, static_cast<int64_t>(std::floor(u * static_cast<double>(levels.count))));
}

double LevelToUnit(const Levels& levels, double x) {
  return (static_cast<double>(internal::NearestLevel(levels, x)) + 0.5) /
         static_cast<double>(levels.count);
}

ParamValue FloatFromUnit(const ParamSpec& spec, double u) {
  if (std::optional<Levels> levels = LevelsOf(spec)) return LevelFromUnit(spec, *levels, u);
  if (u == 0) return spec.min;  // exp(log(min)) can miss min by an ulp
  double x;
  if (UsesLog(spec)) {
    const double a = std::log(spec.min);
    x = std::exp(a + u * (std::log(spec.max) - a));
  } else {
    x = spec.min + u * (spec.max - spec.min);
  }
  return std::clamp(x, std::min(spec.min, spec.max), std::max(spec.min, spec.max));
}

ParamValue IntFromUnit(const ParamSpec& spec, double u) {
  if (std::optional<Levels> levels = LevelsOf(spec)) return LevelFromUnit(spec, *levels, u);
  const IntRange range = IntRangeOf(spec);
  const LogIntScale s = LogIntScaleOf(range);
  const int64_t k = std::llround(std::exp(s.log_lo + u * (s.log_hi - s.log_lo)));
  return std::clamp(k, range.lo, range.hi);
}

ParamValue CategoricalFromUnit(const ParamSpec& spec, double u) {
  if (spec.values.empty()) return std::string();
  const auto n = static_cast<int64_t>(spec.values.size());
  const int64_t i = std::min<int64_t>(static_cast<int64_t>(u * static_cast<double>(n)), n - 1);
  return spec.values[i];
}

double FloatToUnit(const ParamSpec& spec, double x) {
  if (std::optional<Levels> levels = LevelsOf(spec)) return LevelToUnit(*levels, x);
  double t;
  if (UsesLog(spec)) {
    const double a = std::log(spec.min);
    const double b = std::log(spec.max);
    if (a == b) return 0.5;
    if (!(x > 0)) return 0;
    t = (std::log(x) - a) / (b - a);
  } else {
    if (spec.max == spec.min) return 0.5;
    t = (x - spec.min) / (spec.max - spec.min);
  }
  return std::clamp(t, 0.0, 1.0);
}

double IntToUnit(const ParamSpec& spec, int64_t k) {
  if (std::optional<Levels> levels = LevelsOf(spec)) {
    return LevelToUnit(*levels, static_cast<double>(k));
  }
  const IntRange range = IntRangeOf(spec);
  k = std::clamp(k, range.lo, range.hi);
  const LogIntScale s = LogIntScaleOf(range);
  const double centre =
      0.5 * (std::log(static_cast<double>(k) - 0.5) + std::log(static_cast<double>(k) + 0.5));
  return std::clamp((centre - s.log_lo) / (s.log_hi - s.log_lo), 0.0, 1.0);
}

double CategoricalToUnit(const ParamSpec& spec, const std::string& value) {
  const auto it = std::find(spec.values.begin(), spec.values.end(), value);
  if (it == spec.values.end()) return 0.5;  // unknown category: same answer as a wrong type
  const auto i = static_cast<double>(it - spec.values.begin());
  return (i + 0.5) / static_cast<double>(spec.values.size());
}

std::string FormatDouble(double x) {
  // std::to_chars in general format without a precision gives the shortest string that reads
  // back to the same double, laid out like printf's %g.
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::general);
  if (result.ec != std::errc()) return "nan";  // unreachable: 64 chars always suffice
  return std::string(buf, result.ptr);
}

}  // namespace

int SearchSpace::IndexOf(const std::string& name) const {
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

ParamValue FromUnit(const ParamSpec& spec, double u) {
  u = ClampUnit(u);
  switch (spec.kind) {
    case ParamSpec::Kind::kFloat:
      return FloatFromUnit(spec, u);
    case ParamSpec::Kind::kInt:
      return IntFromUnit(spec, u);
    case ParamSpec::Kind::kCategorical:
      return CategoricalFromUnit(spec, u);
  }
  return FloatFromUnit(spec, u);
}

double ToUnit(const ParamSpec& spec, const ParamValue& value) {
  switch (spec.kind) {
    case ParamSpec::Kind::kFloat:
      if (const auto* x = std::get_if<double>(&value)) return FloatToUnit(spec, *x);
      return 0.5;
    case ParamSpec::Kind::kInt:
      if (const auto* k = std::get_if<int64_t>(&value)) return IntToUnit(spec, *k);
      return 0.5;
    case ParamSpec::Kind::kCategorical:
      if (const auto* s = std::get_if<std::string>(&value)) return CategoricalToUnit(spec, *s);
      return 0.5;
  }
  return 0.5;
}

Params FromUnitCube(const SearchSpace& space, absl::Span<const double> u) {
  Params params;
  for (size_t i = 0; i < space.params.size(); ++i) {
    params[space.params[i].name] = FromUnit(space.params[i], i < u.size() ? u[i] : 0.5);
  }
  internal::DropInactive(space, params);
  return params;
}

bool IsActive(const ParamSpec& spec, const Params& params) {
  for (const auto& [name, wanted] : spec.when) {
    const auto it = params.find(name);
    if (it == params.end() || FormatParamValue(it->second) != wanted) return false;
  }
  return true;
}

std::string FormatParamValue(const ParamValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, double>) {
          return FormatDouble(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(v);
        } else {
          return v;
        }
      },
      value);
}

namespace {

// Why value does not fit spec's domain, or "".
std::string OutsideDomain(const ParamSpec& spec, const ParamValue& value) {
  const std::string shown = FormatParamValue(value);
  if (spec.kind == ParamSpec::Kind::kCategorical) {
    const std::string* s = std::get_if<std::string>(&value);
    if (s == nullptr) return "expected one of the values, got the number " + shown;
    if (std::find(spec.values.begin(), spec.values.end(), *s) != spec.values.end()) return "";
    return absl::StrCat("'", *s, "' is not one of ", absl::StrJoin(spec.values, ", "));
  }
  const bool integral = spec.kind == ParamSpec::Kind::kInt;
  if (std::holds_alternative<std::string>(value)) {
    return absl::StrCat("expected ", integral ? "an integer" : "a number", ", got '", shown, "'");
  }
  if (integral && !std::holds_alternative<int64_t>(value)) {
    return "expected an integer, got " + shown;
  }
  const double x = std::visit(
      [](const auto& v) -> double {
        if constexpr (std::is_arithmetic_v<std::decay_t<decltype(v)>>) {
          return static_cast<double>(v);
        } else {
          return 0;
        }
      },
      value);
  auto bound = [&](double b) {
    return integral ? std::to_string(static_cast<int64_t>(b)) : FormatDouble(b);
  };
  if (!std::isfinite(x)) return "expected a finite number, got " + shown;
  if (x < spec.min) return absl::StrCat(shown, " is below min ", bound(spec.min));
  if (x > spec.max) return absl::StrCat(shown, " is above max ", bound(spec.max));
  if (std::optional<Levels> levels = LevelsOf(spec); levels && internal::HasStep(spec)) {
    const double k = (x - levels->origin) / levels->step;
    if (std::abs(k - std::round(k)) > 1e-9) {
      const ParamValue below = internal::LevelValue(spec, *levels, static_cast<int64_t>(k));
      const ParamValue above = internal::LevelValue(spec, *levels, static_cast<int64_t>(k) + 1);
      return absl::StrCat(shown, " is not on the grid ", bound(levels->origin), " + k * ",
                          FormatDouble(levels->step), " (nearest: ", FormatParamValue(below), ", ",
                          FormatParamValue(above), ")");
    }
  }
  return "";
}

}  // namespace

std::vector<ParamProblem> CheckParams(const SearchSpace& space, const Params& params) {
  std::vector<ParamProblem> problems;
  for (const ParamSpec& spec : space.params) {
    const auto it = params.find(spec.name);
    const bool active = IsActive(spec, params);
    if (it == params.end()) {
      if (active) {
        problems.push_back({spec.name, ParamProblem::Kind::kMissing, spec.name + ": missing"});
      }
      continue;
    }
    if (!active) {
      problems.push_back({spec.name, ParamProblem::Kind::kInactive,
                          spec.name + ": set, but inactive (its when: conditions do not hold)"});
      continue;
    }
    if (std::string why = OutsideDomain(spec, it->second); !why.empty()) {
      problems.push_back({spec.name, ParamProblem::Kind::kOutside, spec.name + ": " + why});
    }
  }
  for (const auto& [name, value] : params) {
    if (space.IndexOf(name) < 0) {
      problems.push_back(
          {name, ParamProblem::Kind::kUnknown, name + ": not a parameter of this space"});
    }
  }
  return problems;
}

namespace internal {

std::optional<Levels> LevelsOf(const ParamSpec& spec) {
  if (spec.kind == ParamSpec::Kind::kInt) {
    if (UsesLog(spec)) return std::nullopt;
    const IntRange range = IntRangeOf(spec);
    const int64_t step = std::max<int64_t>(1, std::llround(spec.step));
    return Levels{static_cast<double>(range.lo), static_cast<double>(step),
                  (range.hi - range.lo) / step + 1};
  }
  if (spec.kind != ParamSpec::Kind::kFloat || !HasStep(spec)) return std::nullopt;
  // (max - min) / step can land a hair below a whole number (0.3 / 0.1 is 2.9999999999999996);
  // the tolerance keeps max itself a level then. The cap keeps the count exact in a double.
  const double span = std::max(0.0, (spec.max - spec.min) / spec.step);
  const double last = std::min(std::floor(span + 1e-9 * std::max(1.0, span)), 0x1p53);
  return Levels{spec.min, spec.step, static_cast<int64_t>(last) + 1};
}

ParamValue LevelValue(const ParamSpec& spec, const Levels& levels, int64_t k) {
  k = std::clamp<int64_t>(k, 0, levels.count - 1);
  if (spec.kind == ParamSpec::Kind::kInt) {
    return static_cast<int64_t>(levels.origin) + k * static_cast<int64_t>(levels.step);
  }
  if (k == 0) return levels.origin;
  const double x = levels.origin + static_cast<double>(k) * levels.step;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.15g", x);
  return std::clamp(std::strtod(buf, nullptr), spec.min, std::max(spec.min, spec.max));
}

int64_t NearestLevel(const Levels& levels, double x) {
  if (!std::isfinite(x)) return 0;
  const double k = std::round((x - levels.origin) / levels.step);
  return static_cast<int64_t>(std::clamp(k, 0.0, static_cast<double>(levels.count - 1)));
}

void DropInactive(const SearchSpace& space, Params& params) {
  // Removal only shrinks the map, so this ends after at most params.size() passes.
  bool removed = true;
  while (removed) {
    removed = false;
    for (const ParamSpec& spec : space.params) {
      if (params.contains(spec.name) && !IsActive(spec, params)) {
        params.erase(spec.name);
        removed = true;
      }
    }
  }
}

}  // namespace internal
}  // namespace sextant
