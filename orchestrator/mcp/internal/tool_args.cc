#include "orchestrator/mcp/internal/tool_args.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace sextant::mcp_internal {
namespace {

absl::Status Bad(const std::string& key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("argument '", key, "': ", why));
}

}  // namespace

const nlohmann::json* ToolArgs::Get(const std::string& key) const {
  auto it = args_.find(key);
  if (it == args_.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status ToolArgs::OnlyKeys(const std::set<std::string>& allowed) const {
  for (auto it = args_.begin(); it != args_.end(); ++it) {
    if (!allowed.count(it.key())) {
      std::string names;
      for (const std::string& a : allowed) absl::StrAppend(&names, names.empty() ? "" : ", ", a);
      std::string key = it.key().substr(0, 64);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown argument '", key, "' (the tool takes: ", names, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> ToolArgs::OptString(const std::string& key,
                                                               size_t max_bytes) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return Bad(key, "must be a string");
  const std::string& s = v->get_ref<const std::string&>();
  if (s.size() > max_bytes) return Bad(key, absl::StrCat("longer than ", max_bytes, " bytes"));
  return s;
}

absl::StatusOr<std::string> ToolArgs::String(const std::string& key, size_t max_bytes) const {
  absl::StatusOr<std::optional<std::string>> s = OptString(key, max_bytes);
  if (!s.ok()) return s.status();
  if (!s->has_value() || (*s)->empty()) return Bad(key, "required");
  return **s;
}

absl::StatusOr<std::optional<double>> ToolArgs::OptNumber(const std::string& key, double lo,
                                                          double hi) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return Bad(key, "must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) {
    return Bad(key, absl::StrCat("must be between ", lo, " and ", hi));
  }
  return d;
}

absl::StatusOr<std::optional<int64_t>> ToolArgs::OptInt(const std::string& key, int64_t lo,
                                                        int64_t hi) const {
  absl::StatusOr<std::optional<double>> d =
      OptNumber(key, static_cast<double>(lo), static_cast<double>(hi));
  if (!d.ok()) return d.status();
  if (!d->has_value()) return std::nullopt;
  if (std::floor(**d) != **d) return Bad(key, "must be an integer");
  return static_cast<int64_t>(**d);
}

absl::StatusOr<std::optional<bool>> ToolArgs::OptBool(const std::string& key) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return Bad(key, "must be true or false");
  return v->get<bool>();
}

absl::StatusOr<std::optional<std::vector<double>>> ToolArgs::OptNumbers(const std::string& key,
                                                                        size_t max_count) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) return Bad(key, "must be an array of numbers");
  if (v->size() > max_count) return Bad(key, absl::StrCat("more than ", max_count, " entries"));
  std::vector<double> out;
  for (const nlohmann::json& e : *v) {
    if (!e.is_number() || !std::isfinite(e.get<double>())) {
      return Bad(key, "every entry must be a finite number");
    }
    out.push_back(e.get<double>());
  }
  return out;
}

absl::StatusOr<std::optional<std::map<std::string, double>>> ToolArgs::OptNumberMap(
    const std::string& key, size_t max_count, size_t max_name_bytes) const {
  const nlohmann::json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) return Bad(key, "must be an object of name: number");
  if (v->size() > max_count) return Bad(key, absl::StrCat("more than ", max_count, " entries"));
  std::map<std::string, double> out;
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (it.key().empty() || it.key().size() > max_name_bytes) {
      return Bad(key, absl::StrCat("names must be 1 to ", max_name_bytes, " bytes"));
    }
    if (!it->is_number() || !std::isfinite(it->get<double>())) {
      return Bad(key, absl::StrCat("'", it.key(), "' must be a finite number"));
    }
    out[it.key()] = it->get<double>();
  }
  return out;
}

}  // namespace sextant::mcp_internal
