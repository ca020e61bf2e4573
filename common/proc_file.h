#ifndef SEXTANT_COMMON_PROC_FILE_H_
#define SEXTANT_COMMON_PROC_FILE_H_

#include <string>

namespace sextant {

// The whole text of a small pseudo-file such as /proc/PID/stat, read with plain read(2).
// Returns "" when it cannot be opened or read: a process that exits while it is read makes
// read fail with ESRCH, which std::ifstream turns into an exception that nothing expects.
// Thread-safe.
std::string ReadProcFile(const std::string& path);

}  // namespace sextant

#endif  // SEXTANT_COMMON_PROC_FILE_H_
