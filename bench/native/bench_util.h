// What the native benchmarks share: key=value arguments, raw input files,
// errors as one JSON line, and the timing rule of bench/lib/timing.mjs.
#ifndef MHA_BENCH_NATIVE_BENCH_UTIL_H_
#define MHA_BENCH_NATIVE_BENCH_UTIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "src/status.h"

namespace mha_bench {

using Args = std::map<std::string, std::string>;

// Prints {"error": message} and exits (0: the runner reads the JSON).
[[noreturn]] void Fail(const std::string& message);

Args ParseArgs(int argc, char** argv);
const std::string& Get(const Args& args, const std::string& key);
int64_t GetInt(const Args& args, const std::string& key);

std::vector<uint8_t> ReadFile(const std::string& path);
// Exactly `count` floats, else Fail.
std::vector<float> ReadFloats(const std::string& path, size_t count);
void WriteFloats(const std::string& path, const float* data, size_t count);

// Fails with the status's message unless it is OK.
void Check(const mha::Status& status);

struct Timing {
  double median_ms;
  int64_t reps;
};

// The timing rule (args warmup_reps, warmup_ms, budget_ms, min_reps,
// max_reps): warm up with up to warmup_reps runs while they take under
// warmup_ms in all, then repeat for about budget_ms within [min_reps,
// max_reps]. `run_once` returns its own milliseconds. The caller has run it
// once already (to write its output).
Timing TimeWithRule(const Args& args, const std::function<double()>& run_once);

// Milliseconds `body` takes.
double TimeMs(const std::function<void()>& body);

// Bytes of peak resident memory of this process.
int64_t MaxRssBytes();

}  // namespace mha_bench

#endif  // MHA_BENCH_NATIVE_BENCH_UTIL_H_
