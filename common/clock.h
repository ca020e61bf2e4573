#ifndef SEXTANT_COMMON_CLOCK_H_
#define SEXTANT_COMMON_CLOCK_H_

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sextant {

// A source of time. Everything that reads the time, waits or times out takes a Clock, so that
// tests can use FakeClock. Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Returns the current wall-clock time.
  virtual absl::Time Now() const = 0;
  // Waits for d (d <= 0: returns at once). A polling loop sleeps through this, so that under
  // a FakeClock its deadlines pass without real waiting.
  virtual void SleepFor(absl::Duration d) = 0;
  // Waits on cv, with mu held, until cv is signalled or this clock reaches deadline. It may
  // wake early, so the caller rechecks its condition and calls again. Returns whether deadline
  // has passed. A hub's timed waits go through here, so that under a FakeClock a test's
  // Advance ends them, and nothing waits on the real clock.
  virtual bool WaitUntil(absl::CondVar& cv, absl::Mutex& mu, absl::Time deadline) = 0;
};

// The real wall clock. Thread-safe.
class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepFor(absl::Duration d) override { absl::SleepFor(d); }
  bool WaitUntil(absl::CondVar& cv, absl::Mutex& mu, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    cv.WaitWithDeadline(&mu, deadline);
    return absl::Now() >= deadline;
  }
};

// Returns a process-wide RealClock (stateless, so sharing it is safe).
Clock* RealClockInstance();

// A clock that moves only when told. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000))
      : now_ns_(absl::ToUnixNanos(start)) {}
  absl::Time Now() const override { return absl::FromUnixNanos(now_ns_.load()); }
  // Moves the clock forward by d (d >= 0).
  void Advance(absl::Duration d) { now_ns_ += absl::ToInt64Nanoseconds(d); }
  // Moves the clock forward by d at once (d <= 0: not at all), and lets other threads run.
  void SleepFor(absl::Duration d) override;
  // Waits for cv at most a millisecond of real time, so that another thread's Advance past
  // deadline is seen at once; the time itself moves only through Advance and SleepFor.
  bool WaitUntil(absl::CondVar& cv, absl::Mutex& mu, absl::Time deadline) override
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

 private:
  std::atomic<int64_t> now_ns_;
};

}  // namespace sextant

#endif  // SEXTANT_COMMON_CLOCK_H_
