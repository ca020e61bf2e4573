#ifndef SEXTANT_AGGREGATOR_CHANGE_NOTIFIER_H_
#define SEXTANT_AGGREGATOR_CHANGE_NOTIFIER_H_

#include "absl/synchronization/mutex.h"
#include "common/wait_list.h"

namespace sextant {

// How a hub (FederationHub, SecAggHub) wakes whoever waits on it: the threads blocked on its
// condition variable, under the hub's own mutex, and the calls parked on its WaitList.
// Declare it before the hub's mutex and anything that parks on it, so that it goes last.
// Thread-safe.
class ChangeNotifier {
 public:
  // Wakes the blocked threads and the parked calls: called on every change that may answer
  // one of them.
  void Notify() {
    cv_.SignalAll();
    waiters_.Notify();
  }
  // What blocked threads wait on, with the hub's mutex held.
  absl::CondVar& cv() { return cv_; }
  // Where the service parks the calls that wait on the hub.
  WaitList& waiters() { return waiters_; }

 private:
  WaitList waiters_{4};  // first: destroyed last, after whatever parks on it
  absl::CondVar cv_;
};

}  // namespace sextant

#endif  // SEXTANT_AGGREGATOR_CHANGE_NOTIFIER_H_
