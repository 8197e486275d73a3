#include "src/thread_pool.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace mha_test {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexOnce) {
  for (size_t threads : {1, 2, 3, 8}) {
    mha::ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (size_t n : {0, 1, 2, 7, 100}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<size_t> max_thread{0};
      pool.ParallelFor(n, [&](size_t begin, size_t end, size_t thread) {
        for (size_t i = begin; i < end; ++i) hits[i]++;
        size_t seen = max_thread.load();
        while (thread > seen && !max_thread.compare_exchange_weak(seen, thread)) {
        }
      });
      for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
      EXPECT_LT(max_thread.load(), threads);
    }
  }
}

TEST(ThreadPoolTest, ManyCallsReuseTheSameThreads) {
  mha::ThreadPool pool(2);
  std::atomic<long> sum{0};
  for (int call = 0; call < 2000; ++call) {
    pool.ParallelFor(10, [&](size_t begin, size_t end, size_t) {
      for (size_t i = begin; i < end; ++i) sum += static_cast<long>(i);
    });
  }
  EXPECT_EQ(sum.load(), 2000L * 45);
}

// Items are claimed one by one: while the calling thread is stuck in its
// first item, the worker takes all the others instead of waiting for a
// fixed half to be handed to it. The caller stays stuck until the worker has
// done them, however late it wakes (a loaded machine may hold a thread back
// longer than any fixed sleep), or for 20 s: a pool that hands out fixed
// halves leaves the caller its half and fails then.
TEST(ThreadPoolTest, AStalledThreadLeavesItsShareToTheOthers) {
  mha::ThreadPool pool(2);
  constexpr size_t kItems = 40;
  std::atomic<size_t> by_thread[2] = {{0}, {0}};
  std::atomic<bool> stalled{false};
  pool.ParallelFor(kItems, [&](size_t begin, size_t end, size_t thread) {
    if (thread == 0 && !stalled.exchange(true)) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (by_thread[1].load() < kItems - (end - begin) &&
             std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    by_thread[thread] += end - begin;
  });
  EXPECT_EQ(by_thread[0].load() + by_thread[1].load(), kItems);
  EXPECT_GE(by_thread[1].load(), kItems - 2);
}

// Calls too short for the worker to wake in time: the caller does every item
// and a worker that joins late must find the call closed, never run an item
// of a later call with an earlier body (or twice).
TEST(ThreadPoolTest, LateWorkersNeverRunAnotherCallsItems) {
  mha::ThreadPool pool(3);
  for (int call = 0; call < 3000; ++call) {
    std::atomic<int> hits[3] = {{0}, {0}, {0}};
    pool.ParallelFor(3, [&](size_t begin, size_t end, size_t) {
      for (size_t i = begin; i < end; ++i) hits[i]++;
    });
    for (const std::atomic<int>& h : hits) ASSERT_EQ(h.load(), 1) << "call " << call;
  }
}

}  // namespace
}  // namespace mha_test
