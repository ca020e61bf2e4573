#include "common/process_setup.h"

#include <sys/stat.h>

#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "common/mapped_floats.h"

namespace sextant {

void SetUpProcess() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  GiveFreedMemoryBackPromptly();
  ::setenv("GRPC_DNS_RESOLVER", "native", /*overwrite=*/0);
  // One rule for every file and folder a run creates, whichever code creates it (the store and
  // its -wal/-shm, logs, checkpoints, reports): trial env values and results are not for other
  // local users.
  ::umask(077);
}

}  // namespace sextant
