#include "common/clock.h"

#include <thread>

namespace sextant {

void FakeClock::SleepFor(absl::Duration d) {
  if (d > absl::ZeroDuration()) Advance(d);
  std::this_thread::yield();
}

bool FakeClock::WaitUntil(absl::CondVar& cv, absl::Mutex& mu, absl::Time deadline) {
  if (Now() >= deadline) return true;
  cv.WaitWithTimeout(&mu, absl::Milliseconds(1));
  return Now() >= deadline;
}

Clock* RealClockInstance() {
  static RealClock* clock = new RealClock();
  return clock;
}

}  // namespace sextant
