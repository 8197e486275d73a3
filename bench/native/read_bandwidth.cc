// The machine's read bandwidth: on `threads` threads at once, each sums its
// own buffer (mib MiB, far larger than the last-level cache, written first by
// the thread that reads it) with Highway loads into 4 independent
// accumulators on the best target; the best of `passes` passes. Prints one
// JSON line: {"gbps":..,"threads":..,"bytes": per thread,"target":".."}
// Usage: read_bandwidth threads=<n> mib=<MiB per thread> passes=<n>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "bench/native/bench_util.h"
#include "hwy/aligned_allocator.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/native/read_bandwidth.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace mha_bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sums `count` floats (a multiple of 4 vectors) from `data` (vector-aligned).
float ReadSum(const float* data, size_t count, const char** target) {
  const hn::ScalableTag<float> d;
  const size_t n = hn::Lanes(d);
  auto a0 = hn::Zero(d), a1 = hn::Zero(d), a2 = hn::Zero(d), a3 = hn::Zero(d);
  for (size_t i = 0; i < count; i += 4 * n) {
    a0 = hn::Add(a0, hn::Load(d, data + i));
    a1 = hn::Add(a1, hn::Load(d, data + i + n));
    a2 = hn::Add(a2, hn::Load(d, data + i + 2 * n));
    a3 = hn::Add(a3, hn::Load(d, data + i + 3 * n));
  }
  *target = hwy::TargetName(HWY_TARGET);
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
}

}  // namespace HWY_NAMESPACE
}  // namespace mha_bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mha_bench {
HWY_EXPORT(ReadSum);
}  // namespace mha_bench

// Every thread waits until all have arrived (C++17 has no std::barrier).
class SpinBarrier {
 public:
  explicit SpinBarrier(int threads) : threads_(threads) {}
  void Wait() {
    const int generation = generation_.load();
    if (arrived_.fetch_add(1) + 1 == threads_) {
      arrived_.store(0);
      generation_.fetch_add(1);
    } else {
      while (generation_.load() == generation) std::this_thread::yield();
    }
  }

 private:
  const int threads_;
  std::atomic<int> arrived_{0}, generation_{0};
};

int main(int argc, char** argv) {
  using namespace mha_bench;  // NOLINT
  const Args args = ParseArgs(argc, argv);
  const int threads = static_cast<int>(GetInt(args, "threads"));
  const size_t bytes = static_cast<size_t>(GetInt(args, "mib")) << 20;
  const int passes = static_cast<int>(GetInt(args, "passes"));
  const char* target = "";
  std::vector<float> sums(threads * 16);  // a cache line apart
  // Pass 0 (untimed) warms up; thread 0 times passes 1..passes between barriers.
  std::vector<double> seconds(passes + 1);
  SpinBarrier barrier(threads);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const size_t count = bytes / sizeof(float);
      auto buffer = hwy::AllocateAligned<float>(count);
      for (size_t i = 0; i < count; ++i) buffer[i] = static_cast<float>(i & 1023) * 1e-3f;
      for (int pass = 0; pass <= passes; ++pass) {
        barrier.Wait();
        const auto start = std::chrono::steady_clock::now();
        sums[t * 16] += HWY_DYNAMIC_DISPATCH(ReadSum)(buffer.get(), count, &target);
        barrier.Wait();
        if (t == 0) {
          seconds[pass] =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        }
      }
    });
  }
  for (auto& worker : workers) worker.join();
  const double best = *std::min_element(seconds.begin() + 1, seconds.end());
  std::printf("{\"gbps\":%.2f,\"threads\":%d,\"bytes\":%zu,\"target\":\"%s\",\"sink\":%g}\n",
              threads * static_cast<double>(bytes) / best * 1e-9, threads, bytes, target, sums[0]);
  return 0;
}
#endif  // HWY_ONCE
