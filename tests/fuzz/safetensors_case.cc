// The safetensors fuzz case: the reader, the float conversion and the module
// loader must turn any bytes into either a consistent result or an error.
#include <memory>

#include "src/multihead_attention.h"
#include "src/safetensors.h"
#include "tests/fuzz/fuzz_cases.h"

namespace mha_fuzz {
namespace {

size_t ElementSize(mha::DType dtype) {
  return dtype == mha::DType::kF32 ? 4 : dtype == mha::DType::kF16 || dtype == mha::DType::kBF16 ? 2 : 1;
}

bool IsFloat(mha::DType dtype) {
  return dtype == mha::DType::kF32 || dtype == mha::DType::kF16 || dtype == mha::DType::kBF16;
}

std::string CheckParsed(const uint8_t* data, size_t size, const mha::SafetensorsFile& file) {
  for (const auto& [name, entry] : file.tensors) {
    const int64_t elements = mha::NumElements(entry.shape);
    if (entry.data < data || entry.size > size || entry.data + entry.size > data + size) {
      return name + ": data range outside the input";
    }
    if (elements < 0 || static_cast<size_t>(elements) * ElementSize(entry.dtype) != entry.size) {
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

// Loads into a module shaped like fixtures the seeds come from; when the
// parameters load, a small forward must run.
std::string LoadInto(const uint8_t* data, size_t size, int64_t embed_dim, int64_t num_heads,
                     const std::string& prefix) {
  mha::MultiheadAttentionConfig config;
  config.embed_dim = embed_dim;
  config.num_heads = num_heads;
  std::unique_ptr<mha::MultiheadAttention> module;
  if (!mha::MultiheadAttention::Create(config, &module).ok()) return "Create failed";
  const mha::Status loaded = module->LoadSafetensors(data, size, prefix);
  if (!loaded.ok()) return loaded.message().empty() ? "LoadSafetensors: error without a message" : "";
  const std::vector<float> x(3 * embed_dim, 0.5f);
  const mha::TensorView query{x.data(), {3, embed_dim}};
  mha::ForwardResult result;
  const mha::Status ran = module->Forward(query, query, query, mha::ForwardOptions(), &result);
  if (!ran.ok()) return "Forward after LoadSafetensors: " + ran.message();
  if (result.output.data.size() != x.size()) return "Forward after LoadSafetensors: wrong output size";
  return "";
}

}  // namespace

std::string RunSafetensorsCase(const uint8_t* data, size_t size) {
  mha::SafetensorsFile file;
  const mha::Status parsed = mha::ParseSafetensors(data, size, &file);
  if (!parsed.ok() && parsed.message().empty()) return "ParseSafetensors: error without a message";
  if (parsed.ok()) {
    const std::string problem = CheckParsed(data, size, file);
    if (!problem.empty()) return problem;
  }
  for (const auto& [embed_dim, num_heads] : {std::pair<int64_t, int64_t>{4, 4}, {16, 2}}) {
    for (const char* prefix : {"param.", ""}) {
      const std::string problem = LoadInto(data, size, embed_dim, num_heads, prefix);
      if (!problem.empty()) return problem;
    }
  }
  return "";
}

}  // namespace mha_fuzz
