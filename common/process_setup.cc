#include "common/process_setup.h"

#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "common/mapped_floats.h"

namespace sextant {

void SetUpProcess() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  GiveFreedMemoryBackPromptly();
  ::setenv("GRPC_DNS_RESOLVER", "native", /*overwrite=*/0);
}

}  // namespace sextant
