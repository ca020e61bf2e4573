#ifndef SEXTANT_TESTS_FAKES_SCALED_CLOCK_H_
#define SEXTANT_TESTS_FAKES_SCALED_CLOCK_H_

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace sextant {

// The real clock run `scale` times fast from its creation: its sleeps and waits take 1/scale
// of their length in real time. For code that waits on real processes (which keep the real
// clock) while its own deadlines and budgets pass sooner; a FakeClock's sleeps would pass
// without waiting for those processes at all. Thread-safe.
class ScaledClock : public Clock {
 public:
  explicit ScaledClock(double scale) : scale_(scale), start_(absl::Now()) {}
  absl::Time Now() const override { return start_ + (absl::Now() - start_) * scale_; }
  void SleepFor(absl::Duration d) override {
    if (d > absl::ZeroDuration()) absl::SleepFor(d / scale_);
  }
  bool WaitUntil(absl::CondVar& cv, absl::Mutex& mu, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    cv.WaitWithDeadline(&mu, start_ + (deadline - start_) / scale_);
    return Now() >= deadline;
  }

 private:
  const double scale_;
  const absl::Time start_;
};

}  // namespace sextant

#endif  // SEXTANT_TESTS_FAKES_SCALED_CLOCK_H_
