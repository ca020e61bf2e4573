#include "common/read_file.h"

#include <fstream>
#include <sstream>

namespace sextant {

std::optional<std::string> ReadFileIfPresent(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace sextant
