// Times one decoding step of mha::MultiheadAttention (bench/lib/decode.mjs)
// with the timing rule of bench/lib/timing.mjs and prints one JSON line:
//   {"medianMs":..,"reps":..,"maxRssBytes":..,"target":".."}
// With cache=1 the step runs against a KVCache filled once (the past tokens'
// prefill, or the encoder keys for cross-attention) and rolled back to `past`
// keys (untimed) before each step; with cache=0 it is one forward without a cache whose
// keys are every source row, projected again (the baseline).
// Arguments are key=value (bench/run.mjs passes them):
//   params=<.safetensors> data=<input prefix, e.g. build/bench/data/D1> out=<output .f32>
//   E= H= kv_heads= past= L= cross=0|1 causal=0|1 bias=0|1 rotary_dim= (0: none)
//   rotary_base= dtype=float32|float16|bfloat16 weights=float32|bfloat16|int8 cache=0|1 threads=
//   and issue 22's options (bench_util.h's ApplyModelOptions); base_dtype= base_weights=: a second
//   module with that cache and those weights whose step is timed in alternation (issue 24's
//   precisions against float32; "pairRatio": the median of the pairs' ratios step / base step)
//   warmup_reps= warmup_ms= budget_ms= min_reps= max_reps=
//   target=<Highway target, e.g. AVX2> (bench_util.h's SelectTarget; default: the best)
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/native/bench_util.h"
#include "src/multihead_attention.h"

using namespace mha_bench;  // NOLINT: the benchmark's own helpers

namespace {

mha::MultiheadAttentionConfig ModuleConfig(const Args& args, const std::string& weights) {
  mha::MultiheadAttentionConfig config;
  config.embed_dim = GetInt(args, "E");
  config.num_heads = GetInt(args, "H");
  config.num_kv_heads = GetInt(args, "kv_heads");
  config.bias = GetInt(args, "bias") != 0;
  config.batch_first = true;
  config.weights_dtype = weights == "bfloat16" ? mha::WeightsDtype::kBFloat16
                         : weights == "float16" ? mha::WeightsDtype::kFloat16
                         : weights == "int8"    ? mha::WeightsDtype::kInt8
                                                : mha::WeightsDtype::kFloat32;
  if (GetInt(args, "rotary_dim") > 0) {
    config.rotary.enabled = true;
    config.rotary.dim = GetInt(args, "rotary_dim");
    config.rotary.base = std::stod(Get(args, "rotary_base"));
  }
  ApplyModelOptions(args, &config);
  return config;
}

// One module's step: the new rows and their keys and values against the cache
// (or, without one, against every source row), and what runs before it.
struct Step {
  std::unique_ptr<mha::MultiheadAttention> module;
  std::unique_ptr<mha::KVCache> cache;
  mha::ForwardResult result;
  std::function<void()> forward, before;
};

// The step of a module with `weights`; with a cache of `dtype` filled from `source`
// (self-attention: the past tokens; cross: the encoder states) when cache=1.
std::unique_ptr<Step> MakeStep(const Args& args, const std::string& weights, const std::string& dtype,
                               const mha::TensorView& step, const mha::TensorView& source,
                               const mha::TensorView& all, mha::ThreadPool* pool) {
  const int64_t past = GetInt(args, "past"), L = GetInt(args, "L");
  const bool cross = GetInt(args, "cross") != 0;
  const bool causal = GetInt(args, "causal") != 0;
  auto s = std::make_unique<Step>();
  s->module = CreateAndLoad(args, ModuleConfig(args, weights));
  mha::ForwardOptions options;
  options.need_weights = false;
  Step* const p = s.get();
  if (GetInt(args, "cache")) {
    const auto cache_dtype = dtype == "float16"    ? mha::KVCacheDtype::kFloat16
                             : dtype == "bfloat16" ? mha::KVCacheDtype::kBFloat16
                                                   : mha::KVCacheDtype::kFloat32;
    Check(s->module->CreateKVCache(1, past + (cross ? 0 : L), cache_dtype, &s->cache));
    options.cache = s->cache.get();
    options.is_causal = causal;
    if (past > 0) Check(s->module->Forward(source, source, source, options, &s->result, pool));
    // Cross-attention appends nothing; a self-attention step rolls back first (untimed).
    const mha::TensorView new_rows = cross ? mha::TensorView{} : step;
    s->forward = [p, step, new_rows, options, pool] {
      Check(p->module->Forward(step, new_rows, new_rows, options, &p->result, pool));
    };
    if (!cross) s->before = [p, past] { Check(p->cache->Truncate(past)); };
  } else {
    if (L > 1 && past > 0) Fail("no-cache baseline: several queries after a past need a mask");
    options.is_causal = causal && L > 1;
    const mha::TensorView keys = cross ? source : all;
    s->forward = [p, step, keys, options, pool] {
      Check(p->module->Forward(step, keys, keys, options, &p->result, pool));
    };
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  SelectTarget(args);
  const int64_t E = GetInt(args, "E"), past = GetInt(args, "past"), L = GetInt(args, "L");
  const bool cross = GetInt(args, "cross") != 0;
  const std::string data = Get(args, "data");

  // Self-attention: rows are the past + L tokens; cross: the step's query
  // rows, and the encoder states the cache is filled from.
  const std::vector<float> rows = ReadFloats(data + ".query.f32", (cross ? L : past + L) * E);
  const std::vector<float> encoder = cross ? ReadFloats(data + ".key.f32", past * E) : rows;
  const mha::TensorView step{rows.data() + (cross ? 0 : past * E), {1, L, E}};
  const mha::TensorView source{encoder.data(), {1, past, E}};
  const mha::TensorView all{rows.data(), {1, past + L, E}};

  mha::ThreadPool pool(GetInt(args, "threads"));
  const std::unique_ptr<Step> timed =
      MakeStep(args, Get(args, "weights"), Get(args, "dtype"), step, source, all, &pool);
  if (args.count("base_dtype") == 0) {
    RunAndReport(args, timed->forward, timed->result, timed->before);
    return 0;
  }
  const std::unique_ptr<Step> base =
      MakeStep(args, Get(args, "base_weights"), Get(args, "base_dtype"), step, source, all, &pool);
  const BaseRun base_run{base->forward, base->before};
  RunAndReport(args, timed->forward, timed->result, timed->before, &base_run);
  return 0;
}
