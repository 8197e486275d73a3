// Times mha::MultiheadAttention::Forward on one workload with the timing rule
// of bench/lib/timing.mjs and prints one JSON line:
//   {"medianMs":..,"reps":..,"maxRssBytes":..,"target":".."}
// Arguments are key=value (bench/run.mjs passes them):
//   params=<.safetensors> data=<input prefix, e.g. build/bench/data/W1> out=<output .f32>
//   B= L= S= E= H= cross=0|1 causal=0|1 need_weights=0|1 kpm=0|1 threads=
//   warmup_reps= warmup_ms= budget_ms= min_reps= max_reps=
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/kernels/kernels.h"
#include "src/multihead_attention.h"

namespace {

[[noreturn]] void Fail(const std::string& message) {
  std::printf("{\"error\":\"%s\"}\n", message.c_str());
  std::exit(0);
}

std::map<std::string, std::string> ParseArgs(int argc, char** argv) {
  std::map<std::string, std::string> args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) Fail("argument '" + arg + "' is not key=value");
    args[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  return args;
}

const std::string& Get(const std::map<std::string, std::string>& args, const std::string& key) {
  const auto it = args.find(key);
  if (it == args.end()) Fail("missing argument " + key + "=");
  return it->second;
}

int64_t GetInt(const std::map<std::string, std::string>& args, const std::string& key) {
  return std::stoll(Get(args, key));
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) Fail("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(file), {});
}

std::vector<float> ReadFloats(const std::string& path, size_t count) {
  const std::vector<uint8_t> bytes = ReadFile(path);
  if (bytes.size() != count * sizeof(float)) Fail(path + " has the wrong size");
  std::vector<float> floats(count);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<uint8_t*>(floats.data()));
  return floats;
}

void Check(const mha::Status& status) {
  if (!status.ok()) Fail(status.message());
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = ParseArgs(argc, argv);
  const int64_t B = GetInt(args, "B"), L = GetInt(args, "L"), S = GetInt(args, "S");
  const int64_t E = GetInt(args, "E"), H = GetInt(args, "H");
  const bool cross = GetInt(args, "cross") != 0;
  const std::string data = Get(args, "data");

  mha::MultiheadAttentionConfig config;
  config.embed_dim = E;
  config.num_heads = H;
  config.batch_first = true;
  std::unique_ptr<mha::MultiheadAttention> module;
  Check(mha::MultiheadAttention::Create(config, &module));
  const std::vector<uint8_t> params = ReadFile(Get(args, "params"));
  Check(module->LoadSafetensors(params.data(), params.size()));

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
  auto time_once = [&] {
    const auto start = std::chrono::steady_clock::now();
    Check(module->Forward(q, k, v, options, &result, &pool));
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
  };

  time_once();
  std::ofstream(Get(args, "out"), std::ios::binary)
      .write(reinterpret_cast<const char*>(result.output.data.data()),
             result.output.data.size() * sizeof(float));
  double last = time_once();
  double warmup = last;
  for (int64_t i = 1; i < GetInt(args, "warmup_reps") && warmup + last < GetInt(args, "warmup_ms");
       ++i) {
    last = time_once();
    warmup += last;
  }
  const int64_t reps = std::min(GetInt(args, "max_reps"),
                                std::max(GetInt(args, "min_reps"),
                                         static_cast<int64_t>(std::ceil(
                                             GetInt(args, "budget_ms") / last))));
  std::vector<double> times;
  for (int64_t i = 0; i < reps; ++i) times.push_back(time_once());

  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("{\"medianMs\":%.4f,\"reps\":%lld,\"maxRssBytes\":%lld,\"target\":\"%s\"}\n",
              Median(times), static_cast<long long>(reps),
              static_cast<long long>(usage.ru_maxrss) * 1024, mha::kernels::TargetName());
  return 0;
}
