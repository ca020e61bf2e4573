#include "common/process_setup.h"

#include <signal.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

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

void InstallSignalHandlers(void (*on_interrupt)(int), void (*on_terminate)(int)) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sa.sa_handler = on_terminate != nullptr ? on_terminate : on_interrupt;
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

}  // namespace sextant
