// What the native benchmarks share: key=value arguments, raw input files,
// errors as one JSON line, and the timing rule of bench/lib/timing.mjs with
// the runners' report.
#ifndef MHA_BENCH_NATIVE_BENCH_UTIL_H_
#define MHA_BENCH_NATIVE_BENCH_UTIL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/multihead_attention.h"
#include "src/status.h"

namespace mha_bench {

using Args = std::map<std::string, std::string>;

// Prints {"error": message} and exits (0: the runner reads the JSON).
[[noreturn]] void Fail(const std::string& message);

Args ParseArgs(int argc, char** argv);
const std::string& Get(const Args& args, const std::string& key);
int64_t GetInt(const Args& args, const std::string& key);

// With target=<Highway target name, e.g. AVX2 or SSE4>, the kernels dispatch to that target
// (one this CPU runs and the build compiled; else Fail), so that a host's targets can be timed
// side by side.
void SelectTarget(const Args& args);

// The options of issue 22's rows (bench/workloads.json "models"), each
// optional: window_left= window_right= (-1: no bound) softcap= alibi=0|1
// sinks=<.safetensors with the sinks>.
void ApplyModelOptions(const Args& args, mha::MultiheadAttentionConfig* config);

// Creates the module of `config` and loads params= (and sinks=, a second shard).
std::unique_ptr<mha::MultiheadAttention> CreateAndLoad(const Args& args,
                                                       const mha::MultiheadAttentionConfig& config);

std::vector<uint8_t> ReadFile(const std::string& path);
// Exactly `count` floats, else Fail.
std::vector<float> ReadFloats(const std::string& path, size_t count);

// Fails with the status's message unless it is OK.
void Check(const mha::Status& status);

// A run another is timed in alternation with (issue 24: a decoding step in float32).
struct BaseRun {
  std::function<void()> forward;
  std::function<void()> before;
};

// Runs `forward` once and writes result->output to the file of arg out=, then
// times `forward` with the timing rule and prints the runner's JSON line:
//   {"medianMs":..,"reps":..,"maxRssBytes":..,"target":".."}
// `before`, when given, runs ahead of every forward outside the timed span (a
// decoding step's cache rollback). With a `base`, the two alternate (measurePair)
// and the line adds "baseMedianMs" and "pairRatio".
void RunAndReport(const Args& args, const std::function<void()>& forward,
                  const mha::ForwardResult& result, const std::function<void()>& before = nullptr,
                  const BaseRun* base = nullptr);

}  // namespace mha_bench

#endif  // MHA_BENCH_NATIVE_BENCH_UTIL_H_
