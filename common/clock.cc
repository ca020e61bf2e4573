#include "common/clock.h"

namespace sextant {

Clock* RealClockInstance() {
  static RealClock* clock = new RealClock();
  return clock;
}

}  // namespace sextant
