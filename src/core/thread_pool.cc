#include "src/thread_pool.h"

namespace mha {
namespace {

// Polls before a thread sleeps: tens of microseconds in Node, several times
// longer in Chromium, whose loop polls more slowly (figures: git log --follow
// of this file).
constexpr int kSpins = 20000;

inline void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `done` up to kSpins times; true once it holds.
template <class Predicate>
bool SpinUntil(const Predicate& done) {
  for (int i = 0; i < kSpins; ++i) {
    if (done()) return true;
    Pause();
  }
  return done();
}

}  // namespace

ThreadPool::ThreadPool(size_t num_threads) : num_threads_(num_threads == 0 ? 1 : num_threads) {
  workers_.reserve(num_threads_ - 1);
  for (size_t t = 1; t < num_threads_; ++t) {
    workers_.emplace_back([this, t] { WorkerLoop(t); });
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  work_ready_.notify_all();
  for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::ParallelFor(size_t n, const std::function<void(size_t, size_t, size_t)>& body) {
  if (n == 0) return;
  const size_t threads = num_threads();
  if (threads == 1 || n == 1) {
    body(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  body_.store(&body);
  n_.store(n);
  next_.store(0);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_.store(true);
    generation_.fetch_add(1);
  }
  work_ready_.notify_all();
  RunItems(0);
  // Every item is claimed. A worker that joins from now on finds the call
  // closed; one that joined before is counted in active_ (both sequentially
  // consistent: the worker adds itself, then reads open_).
  open_.store(false);
  auto all_left = [this] { return active_.load() == 0; };
  if (!SpinUntil(all_left)) {
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, all_left);
  }
}

void ThreadPool::RunItems(size_t thread_index) {
  const size_t n = n_.load();
  const std::function<void(size_t, size_t, size_t)>& body = *body_.load();
  for (;;) {
    const size_t i = next_.fetch_add(1);
    if (i >= n) return;
    body(i, i + 1, thread_index);
  }
}

void ThreadPool::WorkerLoop(size_t thread_index) {
  uint64_t seen_generation = 0;
  auto woken = [&] { return stop_.load() || generation_.load() != seen_generation; };
  for (;;) {
    if (!SpinUntil(woken)) {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, woken);
    }
    if (stop_.load()) return;
    seen_generation = generation_.load();
    // Joined: the call open now (possibly a later one than the generation
    // seen) cannot finish, nor its body_ and n_ change, until this leaves.
    active_.fetch_add(1);
    if (open_.load()) RunItems(thread_index);
    if (active_.fetch_sub(1) == 1) {
      // Under the mutex, so the caller cannot miss it between its check and its wait.
      std::lock_guard<std::mutex> lock(mutex_);
      work_done_.notify_one();
    }
  }
}

}  // namespace mha
