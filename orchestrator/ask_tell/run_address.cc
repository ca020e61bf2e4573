#include "orchestrator/ask_tell/run_address.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/read_file.h"
#include "nlohmann/json.hpp"

namespace sextant {

std::string RunAddressPath(const std::string& run_dir) { return run_dir + "/address"; }

absl::Status WriteRunAddress(const std::string& run_dir, const RunAddress& a) {
  nlohmann::json j = {{"address", a.address}, {"run_id", a.run_id}, {"pid", a.pid}};
  if (!a.tls_dir.empty()) j["tls_dir"] = a.tls_dir;
  if (!a.secret_file.empty()) j["secret_file"] = a.secret_file;
  const std::string text = j.dump() + "\n";
  const std::string path = RunAddressPath(run_dir);
  return WriteFileAtomically(path, text, AtomicWriteOptions{0600});
}

absl::StatusOr<RunAddress> ReadRunAddress(const std::string& run_dir) {
  const std::string path = RunAddressPath(run_dir);
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat(path, " is absent: no run serves this directory"));
  }
  std::optional<std::string> text = ReadFileIfPresent(path);
  if (!text) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object() || !j.contains("address") || !j["address"].is_string()) {
    return absl::DataLossError(absl::StrCat(path, " does not hold a run's address"));
  }
  RunAddress a;
  a.address = j["address"].get<std::string>();
  a.run_id = j.value("run_id", "");
  a.pid = j.value("pid", int64_t{0});
  a.tls_dir = j.value("tls_dir", "");
  a.secret_file = j.value("secret_file", "");
  return a;
}

void RemoveRunAddress(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::remove(RunAddressPath(run_dir), ec);
}

}  // namespace sextant
