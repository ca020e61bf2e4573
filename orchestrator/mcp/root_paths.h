#ifndef SEXTANT_ORCHESTRATOR_MCP_ROOT_PATHS_H_
#define SEXTANT_ORCHESTRATOR_MCP_ROOT_PATHS_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace sextant {

// The longest path a client may name, in bytes.
inline constexpr size_t kMaxClientPathBytes = 4096;

// The paths an MCP client names, confined to one root directory: `sextant mcp --root DIR` reads
// and writes nothing outside DIR. Immutable; thread-safe.
class RootPaths {
 public:
  // root must be an existing directory; it is made absolute and canonical (links resolved).
  // InvalidArgument naming it otherwise.
  static absl::StatusOr<RootPaths> Create(const std::string& root);

  // The canonical root.
  const std::string& root() const { return root_; }

  // The absolute path that `path` names: relative paths are taken from the root, and an
  // absolute one must lie under it (as canonical, or as given to Create). The result is
  // lexically normal ("a/./b" is "a/b"). InvalidArgument, naming the path and why, when it is
  // empty, longer than kMaxClientPathBytes, holds a NUL or a ".." component, lies outside the
  // root, or passes through a symbolic link under the root (an existing component that is a
  // link, the last one included). Components that do not exist yet are allowed.
  absl::StatusOr<std::string> Resolve(const std::string& path) const;

  // A path from Resolve relative to the root ("." for the root itself).
  std::string Relative(const std::string& resolved) const;

 private:
  RootPaths(std::string root, std::string given)
      : root_(std::move(root)), given_(std::move(given)) {}
  // absolute (lexically normal) rebased onto root_ when under root_ or given_; "" otherwise.
  std::string Rebase(const std::string& absolute) const;

  std::string root_;   // canonical
  std::string given_;  // absolute and lexically normal, as the user wrote it
};

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_MCP_ROOT_PATHS_H_
