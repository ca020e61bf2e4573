#include "common/process_setup.h"

#include "absl/synchronization/mutex.h"
#include "common/mapped_floats.h"

namespace sextant {

void SetUpProcess() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  GiveFreedMemoryBackPromptly();
}

}  // namespace sextant
