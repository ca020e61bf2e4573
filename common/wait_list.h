// Continuations parked until the state they wait on changes or a time passes, run on a few
// threads of the list's own: a server holds thousands of long-polls this way without a thread
// for each.
#ifndef SEXTANT_COMMON_WAIT_LIST_H_
#define SEXTANT_COMMON_WAIT_LIST_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace sextant {

// Usage: take Version() before looking at the state; when there is nothing yet, Park() with
// that version. A Notify() in between runs the continuation at once, so no change is missed.
// Deadlines are on the steady clock (real time), as a blocking wait's would be. Thread-safe.
class WaitList {
 public:
  using Deadline = std::chrono::steady_clock::time_point;

  // threads: how many continuations may run at once (at least 1).
  explicit WaitList(int threads = 2);
  // Stops the threads; continuations still parked or queued are destroyed without running.
  ~WaitList();
  WaitList(const WaitList&) = delete;
  WaitList& operator=(const WaitList&) = delete;

  // The state's version as seen now.
  uint64_t Version();
  // The state changed: every parked continuation runs soon. Cheap, and never runs one itself,
  // so it may be called under the caller's own locks.
  void Notify();
  // Runs fn on one of the list's threads once the version moves past `seen`, or at `until`,
  // whichever comes first. fn must not block for long: the other continuations wait for a
  // thread meanwhile.
  void Park(uint64_t seen, Deadline until, std::function<void()> fn);

  // Continuations parked now (not yet due).
  size_t parked();

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t version_ = 0;
  bool stop_ = false;
  std::multimap<Deadline, std::function<void()>> parked_;
  std::deque<std::function<void()>> ready_;
  std::vector<std::thread> threads_;
};

}  // namespace sextant

#endif  // SEXTANT_COMMON_WAIT_LIST_H_
