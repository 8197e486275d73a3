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
  // Written before generation_ is bumped, read after it is seen.
  const std::function<void(size_t, size_t, size_t)>* body_ = nullptr;
  size_t n_ = 0;
  // Workers spin on these briefly before sleeping on the condition
  // variables: waking a sleeping thread costs tens of microseconds, as much
  // as a small projection takes.
  std::atomic<uint64_t> generation_{0};
  std::atomic<size_t> pending_{0};
  std::atomic<bool> stop_{false};
  // The next unclaimed item, on a cache line of its own: every claim writes it.
  alignas(64) std::atomic<size_t> next_{0};
};

// Multiply-adds below which a call (one projection, one attention) runs on
// the calling thread: waking the pool's threads and waiting for them costs
// more than sharing saves. Measured (native, AMD EPYC, 1 thread, decode
// steps of E=64..768 against 16..1023 keys): about 12,000 multiply-adds per
// microsecond; issue #12 measured the pool's wake-up in WASM at about 54 us
// (E=64, H=4, L=S=1: 30 us on one thread, 84 us median on two). Sharing
// saves at most half the time, so it pays from about 2 x 30 us x 12,000 =
// 7e5 (native) or 4e5 (WASM, ~3x slower per thread) multiply-adds: 5e5.
// (Two-thread timings on the shared 2-core VM, load 7, were dominated by the
// scheduler: median 2 ms per hand-off, so they could not set this.)
constexpr double kMinSharedWork = 5e5;

// `pool`, or null (the calling thread alone) for work below kMinSharedWork.
inline ThreadPool* SharedPool(ThreadPool* pool, double work) {
  return work < kMinSharedWork ? nullptr : pool;
}

}  // namespace mha

#endif  // MHA_SRC_THREAD_POOL_H_
