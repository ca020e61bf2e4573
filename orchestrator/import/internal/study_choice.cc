#include "orchestrator/import/internal/study_choice.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "orchestrator/import/internal/yaml_scalar.h"

namespace sextant {
namespace {

// Names for an error message: the first few, quoted, and how many more.
std::string Listed(const std::vector<std::string>& names) {
  constexpr size_t kShown = 20;
  std::vector<std::string> quoted;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) quoted.push_back(YamlQuoted(names[i]));
  std::string out = absl::StrJoin(quoted, ", ");
  if (names.size() > kShown) absl::StrAppend(&out, " and ", names.size() - kShown, " more");
  return out;
}

}  // namespace

absl::StatusOr<size_t> ChooseStudy(const std::string& path, const std::string& name,
                                   const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name || (name.empty() && names.size() == 1)) return i;
  }
  if (names.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": holds no study"));
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": holds ", names.size(), " studies; name one with --study: ", Listed(names)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": no study named ", YamlQuoted(name), "; its studies: ", Listed(names)));
}

}  // namespace sextant
