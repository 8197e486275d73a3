// The safetensors fuzz case: the reader, the float conversion, the listing
// of attention modules and the module loader (every layout, `names`,
// shards) must turn any bytes into either a consistent result or an error.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "src/multihead_attention.h"
#include "src/io/safetensors.h"
#include "src/io/weight_layouts.h"
#include "tests/fuzz/fuzz_cases.h"

namespace mha_fuzz {
namespace {

bool IsFloat(mha::DType dtype) {
  return dtype == mha::DType::kF32 || dtype == mha::DType::kF16 || dtype == mha::DType::kBF16;
}

std::string CheckParsed(const uint8_t* data, size_t size, const mha::SafetensorsFile& file) {
  for (const auto& [name, entry] : file.tensors) {
    const int64_t elements = mha::NumElements(entry.shape);
    if (entry.data < data || entry.size > size || entry.data + entry.size > data + size) {
      return name + ": data range outside the input";
    }
    if (elements < 0 || static_cast<size_t>(elements) * mha::DTypeSize(entry.dtype) != entry.size) {
      return name + ": " + std::to_string(entry.size) + " bytes for shape " + mha::ShapeString(entry.shape);
    }
    std::vector<float> floats;
    const mha::Status converted = mha::ToFloat32(name, entry, &floats);
    if (converted.ok() != IsFloat(entry.dtype)) return name + ": ToFloat32 " + converted.message();
    if (converted.ok() && floats.size() != static_cast<size_t>(elements)) {
      return name + ": ToFloat32 gave " + std::to_string(floats.size()) + " floats";
    }
    if (!converted.ok() && converted.message().empty()) return name + ": error without a message";
  }
  return "";
}

// Loads into a module of `config`; when the parameters load, a small
// forward must run.
std::string LoadInto(const mha::SafetensorsFile& file, mha::MultiheadAttentionConfig config,
                     const mha::WeightOptions& options) {
  config.batch_first = true;
  std::unique_ptr<mha::MultiheadAttention> module;
  if (!mha::MultiheadAttention::Create(config, &module).ok()) return "";
  const mha::Status loaded = module->LoadSafetensors(file, options);
  if (!loaded.ok()) return loaded.message().empty() ? "LoadSafetensors: error without a message" : "";
  const int64_t kdim = module->config().kdim, vdim = module->config().vdim;
  const std::vector<float> q(2 * config.embed_dim, 0.5f), k(3 * kdim, 0.25f), v(3 * vdim, -0.5f);
  mha::ForwardResult result;
  const mha::Status ran = module->Forward({q.data(), {1, 2, config.embed_dim}},
                                          {k.data(), {1, 3, kdim}}, {v.data(), {1, 3, vdim}},
                                          mha::ForwardOptions(), &result);
  if (!ran.ok()) return "Forward after LoadSafetensors: " + ran.message();
  if (result.output.data.size() != q.size()) return "Forward after LoadSafetensors: wrong output size";
  return "";
}

mha::MultiheadAttentionConfig Config(int64_t embed_dim, int64_t num_heads) {
  mha::MultiheadAttentionConfig config;
  config.embed_dim = embed_dim;
  config.num_heads = num_heads;
  return config;
}

// Listed modules have positive dims, and load into a module of those dims
// (one key/value head) or fail with a message.
std::string CheckListing(const mha::SafetensorsFile& file) {
  const std::vector<mha::AttentionModuleInfo> modules =
      mha::ListAttentionModules(mha::TensorShapes(file));
  for (size_t i = 0; i < modules.size() && i < 4; ++i) {
    const mha::AttentionModuleInfo& m = modules[i];
    if (m.embed_dim <= 0 || m.kdim <= 0 || m.vdim <= 0 || m.q_size <= 0 || m.k_size <= 0 ||
        m.v_size <= 0) {
      return "ListAttentionModules: non-positive dims at '" + m.module.prefix + "'";
    }
    constexpr int64_t kMaxDim = 256;  // keeps each run fast
    if (m.q_size % m.k_size != 0 ||
        std::max({m.embed_dim, m.kdim, m.vdim, m.q_size, m.v_size}) > kMaxDim) {
      continue;
    }
    // q_size / k_size heads of one key/value head each: num_heads * qk_head_dim
    // = q_size, num_kv_heads * qk_head_dim = k_size (grouped-query when > 1).
    mha::MultiheadAttentionConfig config = Config(m.embed_dim, m.q_size / m.k_size);
    config.num_kv_heads = 1;
    config.kdim = m.kdim;
    config.vdim = m.vdim;
    config.qk_head_dim = m.k_size;
    config.v_head_dim = m.v_size;
    config.bias = m.bias;
    config.add_bias_kv = m.bias_kv;
    const std::string problem = LoadInto(file, config, {m.module.prefix, m.module.layout});
    if (!problem.empty()) return problem;
  }
  return "";
}

// A header-only parse sees the same tensors; two copies of one file as
// shards name a duplicate.
std::string CheckHeaderAndShards(const uint8_t* data, size_t size,
                                 const mha::SafetensorsFile& file) {
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | data[i];
  mha::SafetensorsFile head;
  const mha::Status parsed = mha::ParseSafetensorsHeader(data, 8 + header, size, &head);
  if (!parsed.ok()) return "ParseSafetensorsHeader failed where ParseSafetensors did not: " + parsed.message();
  for (const auto& [name, entry] : file.tensors) {
    auto it = head.tensors.find(name);
    if (it == head.tensors.end() || it->second.shape != entry.shape ||
        it->second.offset != entry.offset || (it->second.data != nullptr && entry.size != 0)) {
      return name + ": differs in the header-only parse";
    }
  }
  if (file.tensors.empty()) return "";
  mha::SafetensorsFile merged;
  const mha::Status twice = mha::ParseSafetensorsShards({{data, size, size}, {data, size, size}}, &merged);
  if (twice.ok() || twice.message().find("in shard 0 and in shard 1") == std::string::npos) {
    return "the same tensors in two shards were not reported: " + twice.message();
  }
  return "";
}

}  // namespace

std::string RunSafetensorsCase(const uint8_t* data, size_t size) {
  mha::SafetensorsFile file;
  const mha::Status parsed = mha::ParseSafetensors(data, size, &file);
  if (!parsed.ok() && parsed.message().empty()) return "ParseSafetensors: error without a message";
  if (!parsed.ok()) return "";
  for (const std::string& problem : {CheckParsed(data, size, file),
                                     CheckHeaderAndShards(data, size, file), CheckListing(file)}) {
    if (!problem.empty()) return problem;
  }
  // The fixtures' modules: detected under both prefixes; forced layouts and
  // names on one configuration.
  std::vector<std::pair<mha::MultiheadAttentionConfig, mha::WeightOptions>> loads;
  for (const char* prefix : {"param.", ""}) {
    loads.push_back({Config(4, 4), {prefix}});
    loads.push_back({Config(16, 2), {prefix}});
    loads.push_back({Config(16, 2), {prefix, mha::WeightLayout::kAuto,
                                     {{"q", "q"}, {"k", "k"}, {"v", "v"}, {"out", "out_proj"}}}});
  }
  for (mha::WeightLayout layout :
       {mha::WeightLayout::kTorch, mha::WeightLayout::kQkvLinear, mha::WeightLayout::kGpt2}) {
    loads.push_back({Config(16, 2), {"param.", layout}});
  }
  for (const auto& [config, options] : loads) {
    const std::string problem = LoadInto(file, config, options);
    if (!problem.empty()) return problem;
  }
  return "";
}

}  // namespace mha_fuzz
