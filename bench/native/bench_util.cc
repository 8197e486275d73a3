#include "bench/native/bench_util.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "hwy/targets.h"
#include "src/io/safetensors.h"
#include "src/kernels/kernels.h"

namespace mha_bench {

void Fail(const std::string& message) {
  std::printf("{\"error\":\"%s\"}\n", message.c_str());
  std::exit(0);
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) Fail("argument '" + arg + "' is not key=value");
    args[arg.substr(0, eq)] = arg.substr(eq + 1);
  }
  return args;
}

const std::string& Get(const Args& args, const std::string& key) {
  const auto it = args.find(key);
  if (it == args.end()) Fail("missing argument " + key + "=");
  return it->second;
}

int64_t GetInt(const Args& args, const std::string& key) { return std::stoll(Get(args, key)); }

void SelectTarget(const Args& args) {
  const auto it = args.find("target");
  if (it == args.end()) return;
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if (it->second == hwy::TargetName(target)) {
      hwy::SetSupportedTargetsForTest(target);
      return;
    }
  }
  Fail("target=" + it->second + " is not a target this CPU runs and the build compiled");
}

void ApplyModelOptions(const Args& args, mha::MultiheadAttentionConfig* config) {
  const auto has = [&](const char* key) { return args.count(key) != 0; };
  if (has("window_left")) config->window.left = GetInt(args, "window_left");
  if (has("window_right")) config->window.right = GetInt(args, "window_right");
  if (has("softcap")) config->softcap = std::stof(Get(args, "softcap"));
  config->alibi.enabled = has("alibi") && GetInt(args, "alibi") != 0;
  config->sinks = has("sinks");
}

std::unique_ptr<mha::MultiheadAttention> CreateAndLoad(const Args& args,
                                                       const mha::MultiheadAttentionConfig& config) {
  std::unique_ptr<mha::MultiheadAttention> module;
  Check(mha::MultiheadAttention::Create(config, &module));
  std::vector<std::vector<uint8_t>> files{ReadFile(Get(args, "params"))};
  if (config.sinks) files.push_back(ReadFile(Get(args, "sinks")));
  std::vector<mha::SafetensorsShard> shards;
  for (const auto& bytes : files) shards.push_back({bytes.data(), bytes.size(), bytes.size()});
  mha::SafetensorsFile parsed;
  Check(mha::ParseSafetensorsShards(shards, &parsed));
  Check(module->LoadSafetensors(parsed));
  return module;
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

namespace {

double TimeMs(const std::function<void()>& body, const std::function<void()>& before) {
  if (before) before();
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// The timing rule's warm-up: up to warmup_reps runs while they take under warmup_ms in all;
// returns the last one's ms.
double WarmUp(const Args& args, const std::function<void()>& forward,
              const std::function<void()>& before) {
  double last = TimeMs(forward, before);
  double warmup = last;
  for (int64_t i = 1; i < GetInt(args, "warmup_reps") && warmup + last < GetInt(args, "warmup_ms");
       ++i) {
    last = TimeMs(forward, before);
    warmup += last;
  }
  return last;
}

// Runs for about budget_ms within [min_reps, max_reps], `ms` a run.
int64_t Reps(const Args& args, double ms) {
  return std::min(GetInt(args, "max_reps"),
                  std::max(GetInt(args, "min_reps"),
                           static_cast<int64_t>(std::ceil(GetInt(args, "budget_ms") / ms))));
}

}  // namespace

// The timing rule of bench/lib/timing.mjs: measure, or with a base measurePair (at least five
// pairs, the base first in each; the median of the pairs' ratios forward / base).
void RunAndReport(const Args& args, const std::function<void()>& forward,
                  const mha::ForwardResult& result, const std::function<void()>& before,
                  const BaseRun* base) {
  if (before) before();
  forward();
  const std::vector<float>& output = result.output.data;
  std::ofstream(Get(args, "out"), std::ios::binary)
      .write(reinterpret_cast<const char*>(output.data()),
             static_cast<std::streamsize>(output.size() * sizeof(float)));
  std::vector<double> times, base_times, ratios;
  std::string paired;
  if (base) {
    const double base_ms = WarmUp(args, base->forward, base->before);
    const int64_t pairs = std::min(GetInt(args, "max_reps"),
                                   std::max<int64_t>(5, Reps(args, base_ms + WarmUp(args, forward, before))));
    for (int64_t i = 0; i < pairs; ++i) {
      base_times.push_back(TimeMs(base->forward, base->before));
      times.push_back(TimeMs(forward, before));
      ratios.push_back(times.back() / base_times.back());
    }
    char fields[96];
    std::snprintf(fields, sizeof(fields), ",\"baseMedianMs\":%.5f,\"pairRatio\":%.5f", Median(base_times),
                  Median(ratios));
    paired = fields;
  } else {
    const int64_t reps = Reps(args, WarmUp(args, forward, before));
    for (int64_t i = 0; i < reps; ++i) times.push_back(TimeMs(forward, before));
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("{\"medianMs\":%.5f,\"reps\":%lld%s,\"maxRssBytes\":%lld,\"target\":\"%s\","
              "\"gemmTile\":\"%s\"}\n",
              Median(times), static_cast<long long>(times.size()), paired.c_str(),
              static_cast<long long>(usage.ru_maxrss) * 1024, mha::kernels::TargetName(),
              mha::kernels::GemmTileName(mha::kernels::GemmTileRows()));
}

}  // namespace mha_bench
