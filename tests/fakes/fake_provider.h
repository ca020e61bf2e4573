#ifndef SEXTANT_TESTS_FAKES_FAKE_PROVIDER_H_
#define SEXTANT_TESTS_FAKES_FAKE_PROVIDER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "orchestrator/fleet/provider.h"

namespace sextant::testing {

// Instances that exist only as entries here: the one cloud that a unit test can own. A test
// can refuse launches (no capacity) and end instances (erase them from `live`). Handles are
// h1, h2, ... in launch order.
class FakeProvider : public Provider {
 public:
  const char* name() const override { return "fake"; }
  absl::StatusOr<std::string> Launch(const InstanceRequest& r) override {
    if (refuse_launches > 0) {
      --refuse_launches;
      ++refused;
      return absl::UnavailableError("no capacity");
    }
    std::string h = absl::StrCat("h", next_++);
    live[h] = r;
    return h;
  }
  absl::Status Terminate(const std::string& h) override {
    live.erase(h);
    terminated.push_back(h);
    return absl::OkStatus();
  }
  InstanceStatus Poll(const std::string& h) override {
    return live.count(h) ? InstanceStatus::Running() : InstanceStatus::Gone("gone");
  }
  absl::Status Interrupt(const std::string& h, bool notice) override {
    (notice ? noticed : killed).push_back(h);
    if (!notice) live.erase(h);
    return absl::OkStatus();
  }

  std::map<std::string, InstanceRequest> live;  // by handle
  std::vector<std::string> terminated, noticed, killed;
  int refuse_launches = 0;  // the next this many launches fail Unavailable
  int refused = 0;

 private:
  int next_ = 1;
};

}  // namespace sextant::testing

#endif  // SEXTANT_TESTS_FAKES_FAKE_PROVIDER_H_
