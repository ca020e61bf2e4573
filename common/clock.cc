#include "common/clock.h"

#include <thread>

namespace sextant {

void FakeClock::SleepFor(absl::Duration d) {
  if (d > absl::ZeroDuration()) Advance(d);
  std::this_thread::yield();
}

Clock* RealClockInstance() {
  static RealClock* clock = new RealClock();
  return clock;
}

}  // namespace sextant
