// The machine's FMA peak on the best Highway target: independent MulAdd
// chains, one per register, on `threads` threads at once. Prints one JSON line:
//   {"gflops":..,"threads":..,"target":".."}
// Usage: fma_peak threads=<n>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/native/fma_peak.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace mha_bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 12 chains cover the FMA latency (4) times its throughput (2 per cycle)
// with room to spare. Returns the FLOPs done; the sum goes to *sink so that
// nothing is optimised away, and the constants come from the caller so that
// the compiler cannot fold the chains.
double FmaChains(size_t iterations, float mul_value, float add_value, float start, float* sink,
                 const char** target) {
  const hn::ScalableTag<float> d;
  const auto mul = hn::Set(d, mul_value);
  const auto add = hn::Set(d, add_value);
  // Distinct starts: identical chains would be merged into one.
  auto a0 = hn::Set(d, start), a1 = hn::Add(a0, add), a2 = hn::Add(a1, add);
  auto a3 = hn::Add(a2, add), a4 = hn::Add(a3, add), a5 = hn::Add(a4, add);
  auto a6 = hn::Add(a5, add), a7 = hn::Add(a6, add), a8 = hn::Add(a7, add);
  auto a9 = hn::Add(a8, add), a10 = hn::Add(a9, add), a11 = hn::Add(a10, add);
  for (size_t i = 0; i < iterations; ++i) {
    a0 = hn::MulAdd(a0, mul, add);
    a1 = hn::MulAdd(a1, mul, add);
    a2 = hn::MulAdd(a2, mul, add);
    a3 = hn::MulAdd(a3, mul, add);
    a4 = hn::MulAdd(a4, mul, add);
    a5 = hn::MulAdd(a5, mul, add);
    a6 = hn::MulAdd(a6, mul, add);
    a7 = hn::MulAdd(a7, mul, add);
    a8 = hn::MulAdd(a8, mul, add);
    a9 = hn::MulAdd(a9, mul, add);
    a10 = hn::MulAdd(a10, mul, add);
    a11 = hn::MulAdd(a11, mul, add);
  }
  const auto sum = hn::Add(hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                                   hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))),
                           hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
  *sink = hn::GetLane(hn::SumOfLanes(d, sum));
  *target = hwy::TargetName(HWY_TARGET);
  return 2.0 * 12 * hn::Lanes(d) * static_cast<double>(iterations);
}

}  // namespace HWY_NAMESPACE
}  // namespace mha_bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace mha_bench {
HWY_EXPORT(FmaChains);
}  // namespace mha_bench

int main(int argc, char** argv) {
  const std::string arg = argc > 1 ? argv[1] : "";
  if (arg.rfind("threads=", 0) != 0) {
    std::fprintf(stderr, "usage: fma_peak threads=<n>\n");
    return 2;
  }
  const int threads = std::atoi(arg.c_str() + 8);
  constexpr size_t kIterations = 200'000'000;
  std::vector<float> sinks(threads * 16);  // a cache line apart
  std::vector<double> flops(threads);
  const char* target = "";
  volatile float mul = 0.9999f, add = 1e-4f, initial = 1.0f;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      flops[t] = HWY_DYNAMIC_DISPATCH(mha_bench::FmaChains)(kIterations, mul, add, initial,
                                                            &sinks[t * 16], &target);
    });
  }
  for (auto& worker : workers) worker.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (double f : flops) total += f;
  std::printf("{\"gflops\":%.2f,\"threads\":%d,\"target\":\"%s\",\"sink\":%g}\n",
              total / seconds * 1e-9, threads, target, sinks[0]);
  return 0;
}
#endif  // HWY_ONCE
