// bench/dtype_step.mjs natively: D2's step (E = 2048, 32 heads, 8 KV heads,
// rotary 64, one token against `past` cached keys) with weights and cache in
// one precision against float32 weights and cache, on the same random inputs,
// timed in alternation after a warm-up (the median of the pairs' ratios and
// each side's median), each step after rolling its cache back (untimed).
// Usage: dtype_step weights=float32|bfloat16|int8 dtype=float32|float16|bfloat16
//          threads=1 past=4095 pairs=200
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/native/bench_util.h"
#include "src/kernels/kernels.h"
#include "src/kv_cache.h"
#include "src/multihead_attention.h"
#include "src/thread_pool.h"

namespace {

using mha_bench::Check;
using mha_bench::Get;
using mha_bench::GetInt;

constexpr int64_t kE = 2048;

std::vector<float> Random(size_t n, uint32_t* seed, float scale) {
  std::vector<float> v(n);
  for (float& x : v) {
    *seed = *seed * 1103515245u + 12345u;
    x = ((*seed >> 8) / 16777216.0f - 0.5f) * scale;
  }
  return v;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

struct Step {
  std::unique_ptr<mha::MultiheadAttention> module;
  std::unique_ptr<mha::KVCache> cache;
  mha::ForwardResult result;
};

// A module of `weights` with a cache of `dtype` holding `past` keys of `rows`.
std::unique_ptr<Step> MakeStep(const std::string& weights, const std::string& dtype,
                               const std::vector<float>& rows, int64_t past,
                               mha::ThreadPool* pool) {
  mha::MultiheadAttentionConfig config;
  config.embed_dim = kE;
  config.num_heads = 32;
  config.num_kv_heads = 8;
  config.bias = false;
  config.batch_first = true;
  config.rotary.enabled = true;
  config.rotary.dim = 64;
  config.weights_dtype = weights == "bfloat16" ? mha::WeightsDtype::kBFloat16
                         : weights == "int8"    ? mha::WeightsDtype::kInt8
                                                : mha::WeightsDtype::kFloat32;
  auto step = std::make_unique<Step>();
  Check(mha::MultiheadAttention::Create(config, &step->module));
  // The same parameters for every module: weights scaled by 1 / sqrt(inputs).
  uint32_t seed = 1;
  std::vector<std::vector<float>> data;
  std::map<std::string, mha::TensorView> views;
  for (const mha::ParameterSpec& spec : step->module->Parameters()) {
    const double scale = spec.shape.size() == 2 ? 1.0 / std::sqrt(spec.shape[1]) : 1.0;
    data.push_back(Random(mha::NumElements(spec.shape), &seed, scale));
    views[spec.name] = {data.back().data(), spec.shape};
  }
  Check(step->module->LoadStateDict(views));
  const auto cache_dtype = dtype == "float16"    ? mha::KVCacheDtype::kFloat16
                           : dtype == "bfloat16" ? mha::KVCacheDtype::kBFloat16
                                                 : mha::KVCacheDtype::kFloat32;
  Check(step->module->CreateKVCache(1, past + 1, cache_dtype, &step->cache));
  mha::ForwardOptions options;
  options.need_weights = false;
  options.cache = step->cache.get();
  options.is_causal = true;
  if (past > 0) {
    const mha::TensorView source{rows.data(), {1, past, kE}};
    Check(step->module->Forward(source, source, source, options, &step->result, pool));
  }
  return step;
}

// The step's time in ms (the rollback before it untimed).
double TimeStep(Step* step, const std::vector<float>& rows, int64_t past, mha::ThreadPool* pool) {
  Check(step->cache->Truncate(past));
  const mha::TensorView token{rows.data() + past * kE, {1, 1, kE}};
  mha::ForwardOptions options;
  options.need_weights = false;
  options.cache = step->cache.get();
  options.is_causal = true;
  const auto start = std::chrono::steady_clock::now();
  Check(step->module->Forward(token, token, token, options, &step->result, pool));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  const mha_bench::Args args = mha_bench::ParseArgs(argc, argv);
  const int64_t past = GetInt(args, "past"), pairs = GetInt(args, "pairs");
  mha::ThreadPool pool(GetInt(args, "threads"));
  uint32_t seed = 7;
  const std::vector<float> rows = Random((past + 1) * kE, &seed, 1.0f);
  const auto base = MakeStep("float32", "float32", rows, past, &pool);
  const auto other = MakeStep(Get(args, "weights"), Get(args, "dtype"), rows, past, &pool);
  for (int i = 0; i < 20; ++i) {
    TimeStep(base.get(), rows, past, &pool);
    TimeStep(other.get(), rows, past, &pool);
  }
  std::vector<double> a, b, ratios;
  for (int64_t i = 0; i < pairs; ++i) {
    a.push_back(TimeStep(base.get(), rows, past, &pool));
    b.push_back(TimeStep(other.get(), rows, past, &pool));
    ratios.push_back(b.back() / a.back());
  }
  float error = 0.0f;
  for (size_t i = 0; i < base->result.output.data.size(); ++i) {
    error = std::max(error, std::fabs(base->result.output.data[i] - other->result.output.data[i]));
  }
  std::printf("{\"target\":\"%s\",\"weights\":\"%s\",\"dtype\":\"%s\",\"threads\":%lld,\"past\":%lld,"
              "\"pairs\":%lld,\"medianMs\":%.4f,\"baseMedianMs\":%.4f,\"pairRatio\":%.4f,"
              "\"memory\":%zu,\"maxAbsDiff\":%.3g}\n",
              mha::kernels::TargetName(), Get(args, "weights").c_str(), Get(args, "dtype").c_str(),
              static_cast<long long>(GetInt(args, "threads")), static_cast<long long>(past),
              static_cast<long long>(pairs), Median(b), Median(a), Median(ratios),
              other->module->memory(), error);
  return 0;
}
