#ifndef SEXTANT_COMMON_READ_FILE_H_
#define SEXTANT_COMMON_READ_FILE_H_

#include <optional>
#include <string>

namespace sextant {

// The whole content of a regular file (binary-safe), or nullopt when it cannot be opened, e.g.
// an optional certificate or token that is not there. Thread-safe.
std::optional<std::string> ReadFileIfPresent(const std::string& path);

}  // namespace sextant

#endif  // SEXTANT_COMMON_READ_FILE_H_
