#include "common/wait_list.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace sextant {
namespace {

using Clock = std::chrono::steady_clock;

// Waits up to 5 s for flag.
bool Eventually(const std::atomic<int>& value, int want) {
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (value.load() != want && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return value.load() == want;
}

// A change wakes every parked continuation long before its deadline.
TEST(WaitListTest, NotifyRunsWhatIsParked) {
  WaitList list;
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    list.Park(list.Version(), Clock::now() + std::chrono::hours(1), [&] { ++ran; });
  }
  EXPECT_EQ(list.parked(), 100u);
  EXPECT_EQ(ran.load(), 0);
  list.Notify();
  EXPECT_TRUE(Eventually(ran, 100));
  EXPECT_EQ(list.parked(), 0u);
}

// A change between looking at the state and parking is not missed: the continuation runs at
// once.
TEST(WaitListTest, AChangeBeforeParkingIsNotMissed) {
  WaitList list;
  const uint64_t seen = list.Version();
  list.Notify();
  std::atomic<int> ran{0};
  list.Park(seen, Clock::now() + std::chrono::hours(1), [&] { ++ran; });
  EXPECT_TRUE(Eventually(ran, 1));
}

// Without a change a continuation runs at its deadline, earliest first, and not before.
TEST(WaitListTest, DeadlinesRunInTheirOrder) {
  WaitList list(1);
  std::atomic<int> order{0};
  std::atomic<int> late_at{0}, early_at{0};
  const auto start = Clock::now();
  list.Park(list.Version(), start + std::chrono::milliseconds(300), [&] { late_at = ++order; });
  list.Park(list.Version(), start + std::chrono::milliseconds(100), [&] { early_at = ++order; });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(order.load(), 0);
  EXPECT_TRUE(Eventually(order, 2));
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(300));
  EXPECT_EQ(early_at.load(), 1);
  EXPECT_EQ(late_at.load(), 2);
}

// The list's end destroys what is still parked without running it.
TEST(WaitListTest, WhatIsStillParkedAtTheEndIsReleasedNotRun) {
  std::atomic<int> ran{0};
  auto owned = std::make_shared<int>(7);
  {
    WaitList list;
    list.Park(list.Version(), Clock::now() + std::chrono::hours(1), [&ran, owned] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(owned.use_count(), 1);
}

}  // namespace
}  // namespace sextant
