#include "orchestrator/mcp/root_paths.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace sextant {
namespace {

namespace fs = std::filesystem;

absl::Status Refuse(const std::string& path, absl::string_view why) {
  // A path of any length is named by its start: the message stays short.
  std::string shown = path.size() > 200 ? absl::StrCat(path.substr(0, 200), "...") : path;
  return absl::InvalidArgumentError(absl::StrCat("path '", shown, "': ", why));
}

// True when path is base or lies below it (both absolute and lexically normal).
bool IsUnder(const std::string& path, const std::string& base) {
  if (path == base) return true;
  const std::string prefix = base == "/" ? base : base + "/";
  return path.compare(0, prefix.size(), prefix) == 0;
}

std::string Normal(const fs::path& p) {
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

absl::StatusOr<RootPaths> RootPaths::Create(const std::string& root) {
  std::error_code ec;
  if (root.empty()) return absl::InvalidArgumentError("--root: empty path");
  const fs::path absolute = fs::absolute(root, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("--root ", root, ": ", ec.message()));
  const fs::path canonical = fs::canonical(absolute, ec);
  if (ec || !fs::is_directory(canonical, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--root ", root, ": not a directory", ec ? ": " + ec.message() : ""));
  }
  return RootPaths(Normal(canonical), Normal(absolute));
}

std::string RootPaths::Rebase(const std::string& absolute) const {
  for (const std::string* base : {&root_, &given_}) {
    if (IsUnder(absolute, *base)) return root_ + absolute.substr(base->size());
  }
  return "";
}

absl::StatusOr<std::string> RootPaths::Resolve(const std::string& path) const {
  if (path.empty()) return Refuse(path, "empty");
  if (path.size() > kMaxClientPathBytes) {
    return Refuse(path, absl::StrCat("longer than ", kMaxClientPathBytes, " bytes"));
  }
  if (path.find('\0') != std::string::npos) return Refuse(path, "holds a NUL byte");
  const fs::path given(path);
  for (const fs::path& part : given) {
    if (part == "..") {
      return Refuse(path, "'..' is not allowed; name a path under the root " + root_);
    }
  }
  const std::string absolute = Normal(given.is_absolute() ? given : fs::path(root_) / given);
  const std::string inside = Rebase(absolute);
  if (inside.empty()) return Refuse(path, "outside the root " + root_);
  // Each existing component below the root must be a real folder or file, never a link: a
  // link could lead anywhere, and whatever checks the path now would not hold later.
  std::string walked = root_;
  for (const fs::path& part : fs::path(inside.substr(root_.size()))) {
    if (part == "/" || part.empty()) continue;
    walked = Normal(fs::path(walked) / part);
    struct stat st;
    if (::lstat(walked.c_str(), &st) != 0) {
      if (errno == ENOENT) break;  // the rest does not exist yet
      return Refuse(path, absl::StrCat("cannot inspect ", walked, ": ", strerror(errno)));
    }
    if (S_ISLNK(st.st_mode)) {
      return Refuse(
          path, absl::StrCat(Relative(walked), " is a symbolic link; the server follows no link"));
    }
  }
  return inside;
}

std::string RootPaths::Relative(const std::string& resolved) const {
  if (resolved == root_) return ".";
  if (IsUnder(resolved, root_)) return resolved.substr(root_ == "/" ? 1 : root_.size() + 1);
  return resolved;
}

}  // namespace sextant
