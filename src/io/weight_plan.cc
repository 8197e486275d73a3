#include "src/io/weight_plan.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace mha {
namespace {

// nn.MultiheadAttention's state_dict names.
constexpr const char* kTorchNames[] = {"in_proj_weight", "q_proj_weight", "k_proj_weight",
                                       "v_proj_weight",  "in_proj_bias",  "bias_k",
                                       "bias_v",         "out_proj.weight", "out_proj.bias"};

Status CheckShape(const ShapeMap& tensors, const std::string& name, const Shape& expected,
                  const ProjectionShapes& e) {
  const Shape& got = tensors.at(name);
  if (got == expected) return Status::Ok();
  return Status::InvalidArgument(name + ": expected shape " + ShapeString(expected) +
                                 " for this module (" + e.config + "), received " +
                                 ShapeString(got));
}

Shape Transposed(const Shape& s) { return {s[1], s[0]}; }

// The biases of `modules` present in the checkpoint.
std::vector<std::string> BiasesOf(const ShapeMap& tensors,
                                  std::initializer_list<const std::string*> modules) {
  std::vector<std::string> found;
  for (const std::string* m : modules) {
    if (!m->empty() && tensors.count(*m + ".bias")) found.push_back(*m + ".bias");
  }
  return found;
}

// A whole tensor's recipe, or zeros of `size` when the (bias) tensor is absent.
Status BiasPiece(const ShapeMap& tensors, const std::string& module, int64_t size,
                 const ProjectionShapes& e, std::vector<Piece>* pieces) {
  const std::string name = module + ".bias";
  if (!tensors.count(name)) {
    pieces->push_back({"", false, 0, size});
    return Status::Ok();
  }
  MHA_RETURN_IF_ERROR(CheckShape(tensors, name, {size}, e));
  pieces->push_back({name, false, 0, size});
  return Status::Ok();
}

// q/k/v_proj_weight and in_proj_bias from one fused projection: a Linear
// weight (q + k + v, E), or a Conv1D weight (E, q + k + v).
Status PlanFused(const ShapeMap& tensors, const AttentionModule& m, const ProjectionShapes& e,
                 std::vector<ParameterRecipe>* out) {
  const bool conv = m.layout == WeightLayout::kGpt2;
  const std::string weight = m.qkv + ".weight";
  if (e.k[1] != e.q[1] || e.v[1] != e.q[1]) {
    return Status::InvalidArgument(weight + ": a fused q/k/v projection needs kdim == vdim == "
                                   "embed_dim; this module has " + e.config);
  }
  const int64_t q = e.q[0], k = e.k[0], v = e.v[0];
  const Shape linear = {q + k + v, e.q[1]};
  MHA_RETURN_IF_ERROR(CheckShape(tensors, weight, conv ? Transposed(linear) : linear, e));
  out->push_back({"q_proj_weight", e.q, {{weight, conv, 0, q}}});
  out->push_back({"k_proj_weight", e.k, {{weight, conv, q, q + k}}});
  out->push_back({"v_proj_weight", e.v, {{weight, conv, q + k, q + k + v}}});
  if (!e.bias) return Status::Ok();
  ParameterRecipe bias{"in_proj_bias", {q + k + v}, {}};
  MHA_RETURN_IF_ERROR(BiasPiece(tensors, m.qkv, q + k + v, e, &bias.pieces));
  out->push_back(std::move(bias));
  return Status::Ok();
}

// The rows of q, k and v in the neox layout's fused projection: for each
// key/value head g, its group of num_heads / num_kv_heads query heads, then
// its key head, then its value head (head dim D each).
struct NeoxRows {
  std::vector<Piece> q, k, v;
};

NeoxRows NeoxPieces(const std::string& tensor, int64_t groups, int64_t group, int64_t D) {
  NeoxRows rows;
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first = g * (group + 2) * D;
    rows.q.push_back({tensor, false, first, first + group * D});
    rows.k.push_back({tensor, false, first + group * D, first + (group + 1) * D});
    rows.v.push_back({tensor, false, first + (group + 1) * D, first + (group + 2) * D});
  }
  return rows;
}

Status PlanNeox(const ShapeMap& tensors, const AttentionModule& m, const ProjectionShapes& e,
                std::vector<ParameterRecipe>* out) {
  const std::string weight = m.qkv + ".weight";
  const int64_t H = e.num_heads, Hkv = e.num_kv_heads, D = e.q[0] / H;
  if (e.k[1] != e.q[1] || e.v[1] != e.q[1] || e.v[0] != e.k[0]) {
    return Status::InvalidArgument(weight + ": the neox layout needs kdim == vdim == embed_dim "
                                   "and v_head_dim == qk_head_dim; this module has " + e.config);
  }
  const int64_t total = e.q[0] + e.k[0] + e.v[0];
  MHA_RETURN_IF_ERROR(CheckShape(tensors, weight, {total, e.q[1]}, e));
  NeoxRows w = NeoxPieces(weight, Hkv, H / Hkv, D);
  out->push_back({"q_proj_weight", e.q, std::move(w.q)});
  out->push_back({"k_proj_weight", e.k, std::move(w.k)});
  out->push_back({"v_proj_weight", e.v, std::move(w.v)});
  if (!e.bias) return Status::Ok();
  ParameterRecipe bias{"in_proj_bias", {total}, {}};
  const std::string name = m.qkv + ".bias";
  if (!tensors.count(name)) {
    bias.pieces.push_back({"", false, 0, total});
  } else {
    MHA_RETURN_IF_ERROR(CheckShape(tensors, name, {total}, e));
    NeoxRows b = NeoxPieces(name, Hkv, H / Hkv, D);
    for (std::vector<Piece>* part : {&b.q, &b.k, &b.v}) {
      bias.pieces.insert(bias.pieces.end(), part->begin(), part->end());
    }
  }
  out->push_back(std::move(bias));
  return Status::Ok();
}

Status PlanSeparate(const ShapeMap& tensors, const AttentionModule& m, const ProjectionShapes& e,
                    std::vector<ParameterRecipe>* out) {
  ParameterRecipe bias{"in_proj_bias", {e.q[0] + e.k[0] + e.v[0]}, {}};
  for (const auto& [module, shape, name] :
       {std::make_tuple(&m.q, &e.q, "q_proj_weight"), std::make_tuple(&m.k, &e.k, "k_proj_weight"),
        std::make_tuple(&m.v, &e.v, "v_proj_weight")}) {
    const std::string weight = *module + ".weight";
    MHA_RETURN_IF_ERROR(CheckShape(tensors, weight, *shape, e));
    out->push_back({name, *shape, {{weight, false, 0, (*shape)[0]}}});
    if (e.bias) MHA_RETURN_IF_ERROR(BiasPiece(tensors, *module, (*shape)[0], e, &bias.pieces));
  }
  if (e.bias) out->push_back(std::move(bias));
  return Status::Ok();
}

Status PlanOutput(const ShapeMap& tensors, const AttentionModule& m, const ProjectionShapes& e,
                  std::vector<ParameterRecipe>* out) {
  const bool conv = m.layout == WeightLayout::kGpt2;
  const std::string weight = m.out + ".weight";
  MHA_RETURN_IF_ERROR(CheckShape(tensors, weight, conv ? Transposed(e.out) : e.out, e));
  out->push_back({"out_proj.weight", e.out, {{weight, conv, 0, e.out[0]}}});
  if (!e.bias) return Status::Ok();
  ParameterRecipe bias{"out_proj.bias", {e.out[0]}, {}};
  MHA_RETURN_IF_ERROR(BiasPiece(tensors, m.out, e.out[0], e, &bias.pieces));
  out->push_back(std::move(bias));
  return Status::Ok();
}

// The tensors under the prefix by their own names (bias_k, bias_v with
// add_bias_kv, unless the torch layout checks them itself; sinks with sinks):
// present exactly when the module asks.
Status PlanOwnNames(const ShapeMap& tensors, const AttentionModule& m, const ProjectionShapes& e,
                    std::vector<ParameterRecipe>* out) {
  std::vector<std::tuple<const char*, const Shape*, const char*>> own = {
      {"bias_k", &e.bias_k, "add_bias_kv"}, {"bias_v", &e.bias_v, "add_bias_kv"},
      {"sinks", &e.sinks, "sinks"}};
  if (m.layout == WeightLayout::kTorch) own.erase(own.begin(), own.begin() + 2);
  for (const auto& [name, shape, option] : own) {
    const std::string full = m.prefix + name;
    const bool present = tensors.count(full) != 0;
    if (shape->empty() && present) {
      return Status::InvalidArgument(full + ": in the checkpoint, but the module was created "
                                     "without " + option);
    }
    if (shape->empty()) continue;
    if (!present) {
      return Status::InvalidArgument(full + ": not in the checkpoint, and the module was created "
                                     "with " + option);
    }
    MHA_RETURN_IF_ERROR(CheckShape(tensors, full, *shape, e));
    out->push_back({name, *shape, {{full, false, 0, (*shape)[0]}}});
  }
  return Status::Ok();
}

std::string ShapesString(const std::vector<Shape>& shapes) {
  std::string s;
  for (const Shape& shape : shapes) s += (s.empty() ? "" : " or ") + ShapeString(shape);
  return s;
}

// q_norm.* and k_norm.* under the prefix: weights present exactly when the
// module has q/k norms, of one of the shapes it accepts; biases only for
// LayerNorm, optional.
Status PlanNorms(const ShapeMap& tensors, const AttentionModule& m, const ProjectionShapes& e,
                 std::vector<ParameterRecipe>* out) {
  for (const auto& [role, shapes] : {std::make_pair("q_norm", &e.q_norm),
                                     std::make_pair("k_norm", &e.k_norm)}) {
    for (const char* part : {".weight", ".bias"}) {
      const std::string name = std::string(role) + part, full = m.prefix + name;
      const bool weight = part[1] == 'w', present = tensors.count(full) != 0;
      if (present && shapes->empty()) {
        return Status::InvalidArgument(full + ": in the checkpoint, but the module was created "
                                       "without qk_norm");
      }
      if (present && !weight && !e.norm_bias) {
        return Status::InvalidArgument(full + ": in the checkpoint, but the module's " +
                                       e.qk_norm + " has no bias (LayerNorm's has: type 'layer')");
      }
      if (!present && weight && !shapes->empty()) {
        return Status::InvalidArgument(full + ": not in the checkpoint, and the module was "
                                       "created with " + e.qk_norm);
      }
      if (!present) continue;
      const Shape& got = tensors.at(full);
      if (std::find(shapes->begin(), shapes->end(), got) == shapes->end()) {
        return Status::InvalidArgument(full + ": expected shape " + ShapesString(*shapes) +
                                       " for this module (" + e.qk_norm + "; " + e.config +
                                       "), received " + ShapeString(got));
      }
      out->push_back({name, got, {{full, false, 0, got[0]}}});
    }
  }
  return Status::Ok();
}

// Row width of `shape` seen as (dim 0, the rest).
int64_t RowWidth(const Shape& shape) { return shape.empty() ? 1 : NumElements(shape) / shape[0]; }

}  // namespace

Status PlanParameters(const ShapeMap& tensors, const AttentionModule& module,
                      const ProjectionShapes& expected, std::vector<ParameterRecipe>* out) {
  out->clear();
  if (module.layout == WeightLayout::kTorch) {
    for (const char* name : kTorchNames) {
      auto it = tensors.find(module.prefix + name);
      if (it == tensors.end()) continue;
      const int64_t rows = it->second.empty() ? 1 : it->second[0];
      out->push_back({name, it->second, {{it->first, false, 0, rows}}});
    }
    MHA_RETURN_IF_ERROR(PlanOwnNames(tensors, module, expected, out));
    return PlanNorms(tensors, module, expected, out);
  }
  if (!expected.bias) {
    const std::vector<std::string> biases =
        BiasesOf(tensors, {&module.q, &module.k, &module.v, &module.qkv, &module.out});
    if (!biases.empty()) {
      return Status::InvalidArgument(biases[0] + ": in the checkpoint, but the module was "
                                     "created with bias: false (create it with bias: true)");
    }
  }
  if (module.layout == WeightLayout::kNeox) {
    MHA_RETURN_IF_ERROR(PlanNeox(tensors, module, expected, out));
  } else {
    MHA_RETURN_IF_ERROR(module.qkv.empty() ? PlanSeparate(tensors, module, expected, out)
                                           : PlanFused(tensors, module, expected, out));
  }
  MHA_RETURN_IF_ERROR(PlanOutput(tensors, module, expected, out));
  MHA_RETURN_IF_ERROR(PlanOwnNames(tensors, module, expected, out));
  return PlanNorms(tensors, module, expected, out);
}

const std::string* WholeTensor(const ParameterRecipe& recipe, const ShapeMap& tensors) {
  if (recipe.pieces.size() != 1) return nullptr;
  const Piece& piece = recipe.pieces[0];
  auto it = tensors.find(piece.tensor);
  if (piece.transpose || it == tensors.end() || it->second != recipe.shape) return nullptr;
  return &piece.tensor;
}

void Assemble(const ParameterRecipe& recipe, const ShapeMap& tensors,
              const std::map<std::string, const float*>& sources, float* out) {
  for (const Piece& piece : recipe.pieces) {
    if (piece.tensor.empty()) {
      std::fill(out, out + (piece.end - piece.begin), 0.0f);
      out += piece.end - piece.begin;
      continue;
    }
    const Shape& shape = tensors.at(piece.tensor);
    const float* src = sources.at(piece.tensor);
    if (!piece.transpose) {
      const int64_t width = RowWidth(shape);
      std::memcpy(out, src + piece.begin * width,
                  static_cast<size_t>((piece.end - piece.begin) * width) * sizeof(float));
      out += (piece.end - piece.begin) * width;
      continue;
    }
    // A Conv1D weight (in, out): Linear row r is its column r.
    const int64_t in = shape[0], cols = shape[1];
    for (int64_t r = piece.begin; r < piece.end; ++r) {
      for (int64_t c = 0; c < in; ++c) *out++ = src[c * cols + r];
    }
  }
}

}  // namespace mha
