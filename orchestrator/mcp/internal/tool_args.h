// A tool call's arguments, read with their types and bounds checked before anything is built
// from them.
#ifndef SEXTANT_ORCHESTRATOR_MCP_INTERNAL_TOOL_ARGS_H_
#define SEXTANT_ORCHESTRATOR_MCP_INTERNAL_TOOL_ARGS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace sextant::mcp_internal {

// Each accessor returns InvalidArgument naming the argument when it has the wrong type or is
// out of bounds; the Opt* ones return nullopt when it is absent (or null). Not thread-safe.
class ToolArgs {
 public:
  explicit ToolArgs(const nlohmann::json& args) : args_(args) {}

  // InvalidArgument naming the first argument not in allowed.
  absl::Status OnlyKeys(const std::set<std::string>& allowed) const;

  absl::StatusOr<std::string> String(const std::string& key, size_t max_bytes) const;
  absl::StatusOr<std::optional<std::string>> OptString(const std::string& key,
                                                       size_t max_bytes) const;
  // A finite number in [lo, hi].
  absl::StatusOr<std::optional<double>> OptNumber(const std::string& key, double lo,
                                                  double hi) const;
  // An integer in [lo, hi] (a number with no fraction, e.g. 3 or 3.0).
  absl::StatusOr<std::optional<int64_t>> OptInt(const std::string& key, int64_t lo,
                                                int64_t hi) const;
  absl::StatusOr<std::optional<bool>> OptBool(const std::string& key) const;
  // An array of at most max_count finite numbers.
  absl::StatusOr<std::optional<std::vector<double>>> OptNumbers(const std::string& key,
                                                                size_t max_count) const;
  // An object of at most max_count entries, names of at most max_name_bytes, finite numbers.
  absl::StatusOr<std::optional<std::map<std::string, double>>> OptNumberMap(
      const std::string& key, size_t max_count, size_t max_name_bytes) const;

 private:
  const nlohmann::json* Get(const std::string& key) const;
  const nlohmann::json& args_;
};

}  // namespace sextant::mcp_internal

#endif  // SEXTANT_ORCHESTRATOR_MCP_INTERNAL_TOOL_ARGS_H_
