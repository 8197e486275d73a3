#include "tests/native/layout_fixture.h"

#include <algorithm>
#include <filesystem>
#include <regex>
#include <set>

#include "tests/native/fixture.h"
#include "src/io/safetensors.h"
#include "src/io/weight_layouts.h"

namespace mha_test {
namespace {

const std::regex kShardSuffix("-[0-9]{5}-of-[0-9]{5}$");

std::string LayoutDir() { return std::string(MHA_FIXTURE_DIR) + "/layouts"; }

// "llama_two_shards-00001-of-00002.safetensors" -> "llama_two_shards".
std::string CaseName(const std::filesystem::path& path) {
  return std::regex_replace(path.stem().string(), kShardSuffix, "");
}

std::vector<std::string> CaseFiles(const std::string& name) {
  std::vector<std::string> paths;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(LayoutDir(), error)) {
    if (entry.path().extension() == ".safetensors" && CaseName(entry.path()) == name) {
      paths.push_back(entry.path().string());
    }
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

int64_t Int(const mha::json::Value& object, const char* key) {
  const mha::json::Value* v = object.Find(key);
  return v && v->is_integer ? v->integer : 0;
}

bool Bool(const mha::json::Value& object, const char* key) {
  const mha::json::Value* v = object.Find(key);
  return v && v->type == mha::json::Type::kBool && v->boolean;
}

}  // namespace

std::vector<std::string> ListLayoutFixtures() {
  std::set<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(LayoutDir(), error)) {
    if (entry.path().extension() == ".safetensors") names.insert(CaseName(entry.path()));
  }
  return {names.begin(), names.end()};
}

mha::Status LoadLayoutFixture(const std::string& name, LayoutFixture* out) {
  out->name = name;
  const std::vector<std::string> paths = CaseFiles(name);
  if (paths.empty()) return mha::Status::InvalidArgument("no files for layout fixture " + name);
  out->shards.resize(paths.size());
  std::vector<mha::SafetensorsShard> shards;
  for (size_t i = 0; i < paths.size(); ++i) {
    MHA_RETURN_IF_ERROR(ReadFile(paths[i], &out->shards[i]));
    shards.push_back({out->shards[i].data(), out->shards[i].size(), out->shards[i].size()});
  }
  MHA_RETURN_IF_ERROR(mha::ParseSafetensorsShards(shards, &out->file));
  auto config = out->file.metadata.find("config");
  if (config == out->file.metadata.end()) {
    return mha::Status::InvalidArgument(name + ": no \"config\" in __metadata__");
  }
  MHA_RETURN_IF_ERROR(mha::json::Parse(config->second.data(), config->second.size(), &out->config));
  if (out->config.Find("module") == nullptr || out->config.Find("prefix") == nullptr) {
    return mha::Status::InvalidArgument(name + ": config lacks \"module\" or \"prefix\"");
  }
  return mha::Status::Ok();
}

mha::MultiheadAttentionConfig LayoutFixture::ModuleConfig() const {
  const mha::json::Value& m = *config.Find("module");
  mha::MultiheadAttentionConfig c;
  c.embed_dim = Int(m, "embed_dim");
  c.num_heads = Int(m, "num_heads");
  c.bias = Bool(m, "bias");
  c.kdim = Int(m, "kdim");
  c.vdim = Int(m, "vdim");
  c.qk_head_dim = Int(m, "qk_head_dim");
  c.v_head_dim = Int(m, "v_head_dim");
  c.num_kv_heads = Int(m, "num_kv_heads");
  const mha::json::Value* rotary = m.Find("rotary");
  if (rotary != nullptr && rotary->type == mha::json::Type::kObject) {
    c.rotary.enabled = true;
    c.rotary.dim = Int(*rotary, "dim");
    c.rotary.base = rotary->Find("base")->number;
    c.rotary.interleaved = Bool(*rotary, "interleaved");
  }
  c.batch_first = Bool(m, "batch_first");
  // The score options a family needs (BLOOM's alibi: true, T5's scale 1).
  c.alibi.enabled = Bool(m, "alibi");
  if (const mha::json::Value* scale = m.Find("scale")) c.scale = static_cast<float>(scale->number);
  c.weights_dtype = CurrentPrecision().weights;
  return c;
}

mha::Status LayoutFixture::Options(mha::WeightOptions* out) const {
  *out = mha::WeightOptions();
  out->prefix = config.Find("prefix")->string;
  const mha::json::Value* layout = config.Find("layout");
  if (layout && layout->type == mha::json::Type::kString) {
    MHA_RETURN_IF_ERROR(mha::ParseLayout(layout->string, &out->layout));
  }
  if (const mha::json::Value* names = config.Find("names")) {
    for (const auto& [role, module] : names->object) out->names[role] = module.string;
  }
  return mha::Status::Ok();
}

mha::Status LayoutFixture::FloatTensors(std::map<std::string, std::vector<float>>* storage,
                                        std::map<std::string, mha::TensorView>* out) const {
  for (const auto& [name, entry] : file.tensors) {
    if (entry.dtype != mha::DType::kF32 && entry.dtype != mha::DType::kF16 &&
        entry.dtype != mha::DType::kBF16) {
      continue;
    }
    MHA_RETURN_IF_ERROR(mha::ToFloat32(name, entry, &(*storage)[name]));
    (*out)[name] = mha::TensorView{(*storage)[name].data(), entry.shape};
  }
  return mha::Status::Ok();
}

mha::ShapeMap LayoutFixture::Shapes() const { return mha::TensorShapes(file); }

}  // namespace mha_test
