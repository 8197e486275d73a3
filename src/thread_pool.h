// A persistent fork-join pool: threads are created once, and in ParallelFor
// each claims the next item of [0, n) from a shared counter until none are
// left, so a thread slowed by other work on its core takes fewer items
// instead of holding everyone up.
#ifndef MHA_SRC_THREAD_POOL_H_
#define MHA_SRC_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mha {

class ThreadPool {
 public:
  // `num_threads` counts the calling thread: 1 creates no worker threads.
  explicit ThreadPool(size_t num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t num_threads() const { return num_threads_; }

  // Calls body(i, i + 1, thread_index) once for every i in [0, n), spread
  // over the threads, and returns when all are done. The calling thread
  // takes part as thread 0. Not reentrant: `body` must not call ParallelFor.
  // Calls from several threads at once are serialised.
  void ParallelFor(size_t n, const std::function<void(size_t, size_t, size_t)>& body);

 private:
  void WorkerLoop(size_t thread_index);
  void RunItems(size_t thread_index);

  size_t num_threads_;  // set before any worker starts: workers read it
  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one ParallelFor at a time
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  // The call in progress: written before it opens, read by workers only
  // after they have joined it.
  std::atomic<const std::function<void(size_t, size_t, size_t)>*> body_{nullptr};
  std::atomic<size_t> n_{0};
  // Workers spin on generation_ briefly before sleeping on work_ready_:
  // waking a sleeping thread costs tens of microseconds natively and up to
  // milliseconds in a loaded page, as much as a small projection takes.
  std::atomic<uint64_t> generation_{0};
  // A worker joins a call (active_ + 1) only while it is open. The caller
  // closes it once every item is claimed and then waits for the workers that
  // joined, never for one still waking up: in Chromium a woken pool thread
  // often started after the caller had done every item (W3, 2 threads, load
  // 7: a quarter of the calls), and the caller used to wait for it anyway.
  std::atomic<bool> open_{false};
  std::atomic<size_t> active_{0};
  std::atomic<bool> stop_{false};
  // The next unclaimed item, on a cache line of its own: every claim writes it.
  alignas(64) std::atomic<size_t> next_{0};
};

// Multiply-adds below which a call (one projection, one attention) runs on
// the calling thread: waking the pool's threads and waiting for them costs
// more than sharing saves. Found by sweeping the threshold on decoding steps
// of E = 64..1024 against 15..4095 cached keys at 2 threads: sharing starts
// to pay a little earlier natively than in WebAssembly, and one value serves
// both builds, between the two; decoding steps of E = 64 (D5) never wake the
// pool. (The workers were spinning between calls, as they are between the
// calls of a decoding step; see kSpins in core/thread_pool.cc. Figures: git
// log --follow of this file.)
constexpr double kMinSharedWork = 1e5;

// `pool`, or null (the calling thread alone) for work below kMinSharedWork.
inline ThreadPool* SharedPool(ThreadPool* pool, double work) {
  return work < kMinSharedWork ? nullptr : pool;
}

}  // namespace mha

#endif  // MHA_SRC_THREAD_POOL_H_
