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
  // waking a sleeping thread can cost as much as a small projection takes.
  std::atomic<uint64_t> generation_{0};
  // A worker joins a call (active_ + 1) only while it is open. The caller
  // closes it once every item is claimed and then waits for the workers that
  // joined, never for one still waking up: in a loaded browser a woken pool
  // thread often starts after the caller has done every item.
  std::atomic<bool> open_{false};
  std::atomic<size_t> active_{0};
  std::atomic<bool> stop_{false};
  // The next unclaimed item, on a cache line of its own: every claim writes it.
  alignas(64) std::atomic<size_t> next_{0};
};

}  // namespace mha

#endif  // MHA_SRC_THREAD_POOL_H_
