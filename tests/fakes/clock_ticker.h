#ifndef SEXTANT_TESTS_FAKES_CLOCK_TICKER_H_
#define SEXTANT_TESTS_FAKES_CLOCK_TICKER_H_

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/time/time.h"
#include "common/clock.h"

namespace sextant {

// Moves a FakeClock forward by `step` every real millisecond while it lives: time passes for
// code that waits on the fake clock (a wait a test expects to time out) without the test
// waiting as long in real time.
class ClockTicker {
 public:
  ClockTicker(FakeClock* clock, absl::Duration step)
      : thread_([this, clock, step] {
          while (!stop_.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            clock->Advance(step);
          }
        }) {}
  ClockTicker(const ClockTicker&) = delete;
  ClockTicker& operator=(const ClockTicker&) = delete;
  ~ClockTicker() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: it starts once stop_ is set up
};

}  // namespace sextant

#endif  // SEXTANT_TESTS_FAKES_CLOCK_TICKER_H_
