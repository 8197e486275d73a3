#include "src/thread_pool.h"

namespace mha {
namespace {

// Static partition: thread t gets [n*t/T, n*(t+1)/T).
size_t RangeBegin(size_t n, size_t t, size_t threads) { return n * t / threads; }

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
    stop_ = true;
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
  {
    std::lock_guard<std::mutex> lock(mutex_);
    body_ = &body;
    n_ = n;
    pending_ = workers_.size();
    ++generation_;
  }
  work_ready_.notify_all();
  const size_t end = RangeBegin(n, 1, threads);
  if (end > 0) body(0, end, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  work_done_.wait(lock, [this] { return pending_ == 0; });
  body_ = nullptr;
}

void ThreadPool::WorkerLoop(size_t thread_index) {
  size_t seen_generation = 0;
  const size_t threads = num_threads();
  for (;;) {
    const std::function<void(size_t, size_t, size_t)>* body;
    size_t n;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      work_ready_.wait(lock, [&] { return stop_ || generation_ != seen_generation; });
      if (stop_) return;
      seen_generation = generation_;
      body = body_;
      n = n_;
    }
    const size_t begin = RangeBegin(n, thread_index, threads);
    const size_t end = RangeBegin(n, thread_index + 1, threads);
    if (begin < end) (*body)(begin, end, thread_index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) work_done_.notify_one();
    }
  }
}

}  // namespace mha
