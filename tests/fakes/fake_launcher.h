#ifndef SEXTANT_TESTS_FAKES_FAKE_LAUNCHER_H_
#define SEXTANT_TESTS_FAKES_FAKE_LAUNCHER_H_

#include <sys/types.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "orchestrator/core/local_launcher.h"

namespace sextant::testing {

// Records what it is asked to do; starts nothing. Every launch gets pid 4242, which never
// exits (Poll is always empty).
class FakeLauncher : public ProcessLauncher {
 public:
  absl::StatusOr<pid_t> Launch(const std::vector<std::string>& argv,
                               const std::string& log_path) override {
    launched.push_back(argv);
    logs.push_back(log_path);
    return 4242;
  }
  void Signal(pid_t pid, int sig) override { signals.push_back({pid, sig}); }
  std::optional<int> Poll(pid_t) override { return std::nullopt; }

  std::vector<std::vector<std::string>> launched;
  std::vector<std::string> logs;
  std::vector<std::pair<pid_t, int>> signals;  // (pid, signal) in order
};

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_FAKES_FAKE_LAUNCHER_H_
