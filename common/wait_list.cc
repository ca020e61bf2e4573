#include "common/wait_list.h"

#include <algorithm>
#include <utility>

namespace sextant {

WaitList::WaitList(int threads) {
  for (int i = 0; i < std::max(threads, 1); ++i) threads_.emplace_back([this] { Run(); });
}

WaitList::~WaitList() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
  // Destroyed here, outside the lock: a continuation may own what takes locks to destroy.
  std::multimap<Deadline, std::function<void()>> parked;
  std::deque<std::function<void()>> ready;
  {
    std::lock_guard<std::mutex> lock(mu_);
    parked.swap(parked_);
    ready.swap(ready_);
  }
}

uint64_t WaitList::Version() {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

void WaitList::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++version_;
    if (parked_.empty()) return;
    for (auto& [until, fn] : parked_) ready_.push_back(std::move(fn));
    parked_.clear();
  }
  cv_.notify_all();
}

void WaitList::Park(uint64_t seen, Deadline until, std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (seen != version_ || until <= std::chrono::steady_clock::now()) {
      ready_.push_back(std::move(fn));
    } else {
      parked_.emplace(until, std::move(fn));
    }
  }
  // Every thread may be asleep until a later deadline than this one.
  cv_.notify_all();
}

size_t WaitList::parked() {
  std::lock_guard<std::mutex> lock(mu_);
  return parked_.size();
}

void WaitList::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (stop_) return;
    const Deadline now = std::chrono::steady_clock::now();
    while (!parked_.empty() && parked_.begin()->first <= now) {
      ready_.push_back(std::move(parked_.begin()->second));
      parked_.erase(parked_.begin());
    }
    if (!ready_.empty()) {
      std::function<void()> fn = std::move(ready_.front());
      ready_.pop_front();
      lock.unlock();
      fn();
      fn = nullptr;  // whatever it owns goes before the lock is taken again
      lock.lock();
      continue;
    }
    if (parked_.empty()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, parked_.begin()->first);
    }
  }
}

}  // namespace sextant
