#ifndef SEXTANT_ORCHESTRATOR_IMPORT_INTERNAL_STUDY_CHOICE_H_
#define SEXTANT_ORCHESTRATOR_IMPORT_INTERNAL_STUDY_CHOICE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sextant {

// Which of a storage's studies (names, in the storage's order) `name` picks: the one so
// named, or for an empty name the storage's only study. InvalidArgument naming the file
// when the storage holds no study, when an empty name meets several (listing them, and
// saying to name one with --study), or when none has the name (listing the studies).
absl::StatusOr<size_t> ChooseStudy(const std::string& path, const std::string& name,
                                   const std::vector<std::string>& names);

}  // namespace sextant

#endif  // SEXTANT_ORCHESTRATOR_IMPORT_INTERNAL_STUDY_CHOICE_H_
