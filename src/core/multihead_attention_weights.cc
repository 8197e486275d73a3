// MultiheadAttention's loaders: state_dicts and .safetensors shards in any
// layout of weight_layouts.h, turned into nn.MultiheadAttention parameters by
// the recipes of weight_plan.h.
#include <deque>
#include <exception>
#include <set>

#include "src/multihead_attention.h"
#include "src/io/weight_plan.h"

namespace mha {

struct MultiheadAttention::Recipes {
  std::vector<ParameterRecipe> list;
  // torch recipes are named relative to the prefix: messages put it back.
  std::string message_prefix;
};

namespace {

std::string ConfigString(const MultiheadAttentionConfig& c) {
  return "embed_dim " + std::to_string(c.embed_dim) + ", num_heads " +
         std::to_string(c.num_heads) + ", num_kv_heads " + std::to_string(c.num_kv_heads) +
         ", kdim " + std::to_string(c.kdim) + ", vdim " +
         std::to_string(c.vdim) + ", qk_head_dim " + std::to_string(c.qk_head_dim) +
         ", v_head_dim " + std::to_string(c.v_head_dim);
}

ProjectionShapes ExpectedShapes(const std::vector<ParameterSpec>& accepted,
                                const MultiheadAttentionConfig& c) {
  ProjectionShapes e;
  for (const ParameterSpec& spec : accepted) {
    if (spec.name == "q_proj_weight") e.q = spec.shape;
    if (spec.name == "k_proj_weight") e.k = spec.shape;
    if (spec.name == "v_proj_weight") e.v = spec.shape;
    if (spec.name == "out_proj.weight") e.out = spec.shape;
    if (spec.name == "bias_k") e.bias_k = spec.shape;
    if (spec.name == "bias_v") e.bias_v = spec.shape;
    if (spec.name == "sinks") e.sinks = spec.shape;
    if (spec.name == "q_norm.weight") e.q_norm.push_back(spec.shape);
    if (spec.name == "k_norm.weight") e.k_norm.push_back(spec.shape);
  }
  const QkNormConfig& n = c.qk_norm;
  e.norm_bias = n.enabled && n.type == QkNormType::kLayer;
  e.qk_norm = std::string("qk_norm ") + (e.norm_bias ? "layer" : "rms") + " over '" +
              (n.over == QkNormOver::kAll ? "all" : "head") + "'";
  e.bias = c.bias;
  e.num_heads = c.num_heads;
  e.num_kv_heads = c.num_kv_heads;
  e.config = ConfigString(c);
  return e;
}

std::set<std::string> UsedTensors(const std::vector<ParameterRecipe>& recipes) {
  std::set<std::string> used;
  for (const ParameterRecipe& recipe : recipes) {
    for (const Piece& piece : recipe.pieces) {
      if (!piece.tensor.empty()) used.insert(piece.tensor);
    }
  }
  return used;
}

}  // namespace

Status MultiheadAttention::Plan(const ShapeMap& tensors, const WeightOptions& options,
                                Recipes* out) const {
  AttentionModule module;
  MHA_RETURN_IF_ERROR(FindAttentionModule(tensors, options, &module));
  out->message_prefix = module.layout == WeightLayout::kTorch ? module.prefix : "";
  return PlanParameters(tensors, module, ExpectedShapes(AcceptedParameters(), config_),
                        &out->list);
}

Status MultiheadAttention::LoadPlanned(const Recipes& recipes, const ShapeMap& shapes,
                                       const std::map<std::string, const float*>& sources) {
  // Everything is checked before anything loads: a bad checkpoint changes nothing.
  const std::string& prefix = recipes.message_prefix;
  std::map<std::string, TensorView> params;
  std::deque<std::vector<float>> assembled;
  for (const ParameterRecipe& recipe : recipes.list) {
    if (const std::string* whole = WholeTensor(recipe, shapes)) {
      params[recipe.name] = TensorView{sources.at(*whole), recipe.shape};
      continue;
    }
    assembled.emplace_back(static_cast<size_t>(NumElements(recipe.shape)));
    Assemble(recipe, shapes, sources, assembled.back().data());
    params[recipe.name] = TensorView{assembled.back().data(), recipe.shape};
  }
  std::set<std::string> seen;
  for (const auto& [name, tensor] : params) {
    const Status status = CheckParameter(name, tensor.data, tensor.shape);
    if (!status.ok()) return Status(status.code(), prefix + status.message());
    seen.insert(name);
  }
  std::vector<std::string> missing = MissingParameters(seen);
  for (std::string& name : missing) name = prefix + name;
  if (!missing.empty()) {
    return Status::InvalidArgument("state_dict: missing parameters: " + JoinNames(missing));
  }
  for (const auto& [name, tensor] : params) {
    MHA_RETURN_IF_ERROR(LoadParameter(name, tensor.data, tensor.shape));
  }
  return Status::Ok();
}

Status MultiheadAttention::LoadStateDict(const std::map<std::string, TensorView>& tensors,
                                         const WeightOptions& options) {
  try {
    ShapeMap shapes;
    for (const auto& [name, tensor] : tensors) shapes[name] = tensor.shape;
    Recipes recipes;
    MHA_RETURN_IF_ERROR(Plan(shapes, options, &recipes));
    std::map<std::string, const float*> sources;
    for (const std::string& name : UsedTensors(recipes.list)) {
      const TensorView& tensor = tensors.at(name);
      MHA_RETURN_IF_ERROR(CheckDimsAndData(name, tensor.shape, tensor.data));
      sources[name] = tensor.data;
    }
    return LoadPlanned(recipes, shapes, sources);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("state_dict: not enough memory to assemble the parameters");
  }
}

Status MultiheadAttention::LoadSafetensors(const SafetensorsFile& file,
                                           const WeightOptions& options) {
  try {
    const ShapeMap shapes = TensorShapes(file);
    Recipes recipes;
    MHA_RETURN_IF_ERROR(Plan(shapes, options, &recipes));
    std::map<std::string, std::vector<float>> floats;  // each tensor used, converted once
    std::map<std::string, const float*> sources;
    for (const std::string& name : UsedTensors(recipes.list)) {
      MHA_RETURN_IF_ERROR(ToFloat32(name, file.tensors.at(name), &floats[name]));
      sources[name] = floats[name].data();
    }
    return LoadPlanned(recipes, shapes, sources);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("safetensors: not enough memory to convert the tensors");
  }
}

Status MultiheadAttention::LoadSafetensors(const uint8_t* bytes, size_t size,
                                           const WeightOptions& options) {
  SafetensorsFile file;
  MHA_RETURN_IF_ERROR(ParseSafetensors(bytes, size, &file));
  return LoadSafetensors(file, options);
}

Status MultiheadAttention::WeightSources(const ShapeMap& tensors, const WeightOptions& options,
                                         std::vector<std::string>* names) const {
  Recipes recipes;
  MHA_RETURN_IF_ERROR(Plan(tensors, options, &recipes));
  const std::set<std::string> used = UsedTensors(recipes.list);
  names->assign(used.begin(), used.end());
  return Status::Ok();
}

}  // namespace mha
