// Times mha::MultiheadAttention::Forward on one workload with the timing rule
// of bench/lib/timing.mjs and prints one JSON line:
//   {"medianMs":..,"reps":..,"maxRssBytes":..,"target":".."}
// Arguments are key=value (bench/run.mjs passes them):
//   params=<.safetensors> data=<input prefix, e.g. build/bench/data/W1> out=<output .f32>
//   B= L= S= E= H= cross=0|1 causal=0|1 need_weights=0|1 kpm=0|1 threads=
//   and issue 22's options (bench_util.h's ApplyModelOptions)
//   warmup_reps= warmup_ms= budget_ms= min_reps= max_reps=
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/native/bench_util.h"
#include "src/multihead_attention.h"

using namespace mha_bench;  // NOLINT: the benchmark's own helpers

int main(int argc, char** argv) {
  const Args args = ParseArgs(argc, argv);
  const int64_t B = GetInt(args, "B"), L = GetInt(args, "L"), S = GetInt(args, "S");
  const int64_t E = GetInt(args, "E"), H = GetInt(args, "H");
  const bool cross = GetInt(args, "cross") != 0;
  const std::string data = Get(args, "data");

  mha::MultiheadAttentionConfig config;
  config.embed_dim = E;
  config.num_heads = H;
  config.batch_first = true;
  ApplyModelOptions(args, &config);
  const std::unique_ptr<mha::MultiheadAttention> module = CreateAndLoad(args, config);

  const std::vector<float> query = ReadFloats(data + ".query.f32", B * L * E);
  const std::vector<float> key = cross ? ReadFloats(data + ".key.f32", B * S * E) : query;
  const std::vector<float> value = cross ? ReadFloats(data + ".value.f32", B * S * E) : query;
  std::vector<uint8_t> key_padding_mask;
  mha::ForwardOptions options;
  if (GetInt(args, "kpm")) {
    key_padding_mask = ReadFile(data + ".kpm.u8");
    options.key_padding_mask = mha::MaskView::Bool(key_padding_mask.data(), {B, S});
  }
  options.is_causal = GetInt(args, "causal") != 0;
  options.need_weights = GetInt(args, "need_weights") != 0;
  const mha::TensorView q{query.data(), {B, L, E}};
  const mha::TensorView k{key.data(), {B, S, E}};
  const mha::TensorView v{value.data(), {B, S, E}};

  mha::ThreadPool pool(GetInt(args, "threads"));
  mha::ForwardResult result;
  auto forward = [&] { Check(module->Forward(q, k, v, options, &result, &pool)); };
  RunAndReport(args, forward, result);
  return 0;
}
