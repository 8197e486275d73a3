// MultiheadAttention's loaders: state_dicts and .safetensors shards in any
// layout of weight_layouts.h, turned into nn.MultiheadAttention parameters by
// the recipes of weight_plan.h.
#include <algorithm>
#include <deque>
#include <exception>
#include <set>

#include "src/core/multihead_attention_impl.h"
#include "src/multihead_attention.h"
#include "src/io/safetensors.h"
#include "src/io/weight_layouts.h"
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

bool IsInWeight(const std::string& name) {
  return name == "in_proj_weight" || name == "q_proj_weight" || name == "k_proj_weight" ||
         name == "v_proj_weight";
}

// kAuto: the 16-bit dtype every tensor of these recipes is stored in, else
// float32.
kernels::WeightType StoredType(const std::vector<const ParameterRecipe*>& recipes,
                               const std::map<std::string, DType>& stored) {
  std::set<DType> dtypes;
  for (const ParameterRecipe* recipe : recipes) {
    for (const Piece& piece : recipe->pieces) {
      const auto it = stored.find(piece.tensor);
      dtypes.insert(it != stored.end() ? it->second : DType::kF32);
    }
  }
  if (dtypes.size() != 1) return kernels::WeightType::kFloat32;
  if (*dtypes.begin() == DType::kF16) return kernels::WeightType::kFloat16;
  if (*dtypes.begin() == DType::kBF16) return kernels::WeightType::kBFloat16;
  return kernels::WeightType::kFloat32;
}

// A recipe's parameter from `sources`: one whole tensor as it is, else
// assembled into new storage.
TensorView BuildParameter(const ParameterRecipe& recipe, const ShapeMap& shapes,
                          const std::map<std::string, const float*>& sources,
                          std::deque<std::vector<float>>* storage) {
  if (const std::string* whole = WholeTensor(recipe, shapes)) {
    return TensorView{sources.at(*whole), recipe.shape};
  }
  storage->emplace_back(static_cast<size_t>(NumElements(recipe.shape)));
  Assemble(recipe, shapes, sources, storage->back().data());
  return TensorView{storage->back().data(), recipe.shape};
}

Status MissingError(std::vector<std::string> missing, const std::string& prefix) {
  if (missing.empty()) return Status::Ok();
  for (std::string& name : missing) name = prefix + name;
  return Status::InvalidArgument("state_dict: missing parameters: " + JoinNames(missing));
}

// Projection parameters go into the weights, the others (key/value biases,
// sinks, q/k norms) into the module's own vectors.
bool IsProjection(const std::string& name) {
  return IsInWeight(name) || name == "in_proj_bias" || name == "out_proj.weight" ||
         name == "out_proj.bias";
}

}  // namespace

kernels::WeightType StoredWeightType(WeightsDtype dtype, kernels::WeightType stored) {
  switch (dtype) {
    case WeightsDtype::kFloat32: return kernels::WeightType::kFloat32;
    case WeightsDtype::kFloat16: return kernels::WeightType::kFloat16;
    case WeightsDtype::kBFloat16: return kernels::WeightType::kBFloat16;
    case WeightsDtype::kInt8: return kernels::WeightType::kInt8;
    default: return stored;
  }
}

namespace {

// The projections' weight types {in, out} for `recipes` as `dtype` keeps them.
std::pair<kernels::WeightType, kernels::WeightType> WeightTypes(
    WeightsDtype dtype, const std::vector<ParameterRecipe>& recipes,
    const std::map<std::string, DType>& stored) {
  std::vector<const ParameterRecipe*> in, out;
  for (const ParameterRecipe& recipe : recipes) {
    if (IsInWeight(recipe.name)) in.push_back(&recipe);
    if (recipe.name == "out_proj.weight") out.push_back(&recipe);
  }
  return {StoredWeightType(dtype, StoredType(in, stored)),
          StoredWeightType(dtype, StoredType(out, stored))};
}

}  // namespace

ProjectionWeights MultiheadAttention::Impl::NewWeights(kernels::WeightType in_type,
                                                      kernels::WeightType out_type) const {
  const size_t E = embed_dim;
  const bool fused = kdim == embed_dim && vdim == embed_dim;
  ProjectionWeights w;
  w.qkv_proj.Reset(in_type, fused ? qk + kk + kv : 0, E);
  w.q_proj.Reset(in_type, qk, E);
  w.k_proj.Reset(in_type, kk, kdim);
  w.v_proj.Reset(in_type, kv, vdim);
  w.out_proj.Reset(out_type, E, vv);
  return w;
}

void ProjectionWeights::Reserve() {
  if (qkv_proj.out() > 0) {
    qkv_proj.Reserve();
  } else {
    for (PackedLinear* p : {&q_proj, &k_proj, &v_proj}) p->Reserve();
  }
  out_proj.Reserve();
}

bool ProjectionWeights::Reserved(kernels::WeightType in_type, kernels::WeightType out_type) const {
  if (q_proj.type() != in_type || out_proj.type() != out_type || !out_proj.reserved()) {
    return false;
  }
  if (qkv_proj.out() > 0) return qkv_proj.reserved();
  return q_proj.reserved() && k_proj.reserved() && v_proj.reserved();
}

void MultiheadAttention::Impl::StoreParameter(const std::string& name, const float* data,
                                              int64_t size, ProjectionWeights* w) {
  // In-projection rows [row0, row0 + rows) (weights from data, or biases).
  const auto store_in = [&](size_t row0, const float* src, size_t rows, bool bias) {
    if (w->qkv_proj.out() > 0) {
      bias ? w->qkv_proj.SetBias(row0, src, rows) : w->qkv_proj.SetRows(row0, src, rows);
      return;
    }
    // Apart: each of q, k, v takes its rows of [row0, row0 + rows) (the
    // rows of a weight lie in one of them: in_proj_weight loads only fused).
    size_t begin = 0;
    for (PackedLinear* p : {&w->q_proj, &w->k_proj, &w->v_proj}) {
      const size_t end = begin + p->out();
      const size_t lo = std::max(row0, begin), hi = std::min(row0 + rows, end);
      if (lo < hi && bias) p->SetBias(lo - begin, src + (lo - row0), hi - lo);
      if (lo < hi && !bias) p->SetRows(lo - begin, src + (lo - row0) * p->in(), hi - lo);
      begin = end;
    }
  };
  if (name == "in_proj_weight" || name == "q_proj_weight") {
    store_in(0, data, name == "in_proj_weight" ? qk + kk + kv : qk, false);
  } else if (name == "k_proj_weight") {
    store_in(qk, data, kk, false);
  } else if (name == "v_proj_weight") {
    store_in(qk + kk, data, kv, false);
  } else if (name == "in_proj_bias") {
    store_in(0, data, qk + kk + kv, true);
  } else if (name == "out_proj.weight") {
    w->out_proj.SetRows(0, data, embed_dim);
  } else if (name == "out_proj.bias") {
    w->out_proj.SetBias(0, data, embed_dim);
  } else if (name.rfind("q_norm.", 0) == 0 || name.rfind("k_norm.", 0) == 0) {
    const bool q = name[0] == 'q', bias = name.compare(7, 4, "bias") == 0;
    std::vector<float>& dst = q ? (bias ? q_norm_bias : q_norm) : (bias ? k_norm_bias : k_norm);
    // A weight shared by the heads repeats for each (the kernel reads one per feature).
    for (size_t at = 0; at < dst.size(); at += static_cast<size_t>(size)) {
      std::copy(data, data + size, dst.begin() + at);
    }
    // Gemma 3 stores w - 1: the weight is w + weight_offset, added once here in float32.
    if (!bias) {
      for (float& x : dst) x += qk_norm_offset;
    }
  } else {
    std::vector<float>& dst = name == "bias_k" ? bias_k : name == "bias_v" ? bias_v : sinks;
    std::copy(data, data + dst.size(), dst.begin());
  }
}

size_t MultiheadAttention::Impl::WeightBytes() const {
  size_t bytes = (bias_k.size() + bias_v.size() + sinks.size() + q_norm.size() + k_norm.size() +
                  q_norm_bias.size() + k_norm_bias.size()) * sizeof(float);
  for (const PackedLinear* p : {&weights.q_proj, &weights.k_proj, &weights.v_proj,
                                &weights.qkv_proj, &weights.out_proj}) {
    bytes += p->bytes();
  }
  return bytes;
}

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
    params[recipe.name] = BuildParameter(recipe, shapes, sources, &assembled);
  }
  std::set<std::string> seen;
  for (const auto& [name, tensor] : params) {
    const Status status = CheckParameter(name, tensor.data, tensor.shape);
    if (!status.ok()) return Status(status.code(), prefix + status.message());
    seen.insert(name);
  }
  MHA_RETURN_IF_ERROR(MissingError(MissingParameters(seen), prefix));
  // The weights' types (kAuto: float32, as the tensors are given).
  const auto [in_type, out_type] = WeightTypes(config_.weights_dtype, recipes.list, {});
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  // All or nothing: everything that allocates comes first (throwing
  // std::bad_alloc with the module unchanged), then the writes, which
  // cannot fail. This load replaces every weight: into new ones, swapped in
  // at the end, unless the module's are of these types and allocated (so a
  // failure keeps the old ones, and a reload needs no second copy).
  const bool fresh = !m.weights.Reserved(in_type, out_type);
  ProjectionWeights staged;
  if (fresh) {
    staged = m.NewWeights(in_type, out_type);
    staged.Reserve();
  }
  std::set<std::string> loaded = m.loaded;
  for (const auto& [name, tensor] : params) loaded.insert(name);
  for (const auto& [name, tensor] : params) {
    m.StoreParameter(name, tensor.data, NumElements(tensor.shape), fresh ? &staged : &m.weights);
  }
  if (fresh) m.weights = std::move(staged);
  m.loaded.swap(loaded);
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
  StreamedLoad load;
  std::vector<std::string> names;
  MHA_RETURN_IF_ERROR(StartLoad(file, options, &load, &names));
  for (const std::string& name : names) {
    MHA_RETURN_IF_ERROR(FeedLoad(&load, name, file.tensors.at(name).data));
  }
  return FinishLoad(&load);
}

Status MultiheadAttention::LoadSafetensors(const uint8_t* bytes, size_t size,
                                           const WeightOptions& options) {
  SafetensorsFile file;
  MHA_RETURN_IF_ERROR(ParseSafetensors(bytes, size, &file));
  return LoadSafetensors(file, options);
}

// The state of a streamed load: the module that started it, the plan, the
// new projection weights being filled, and only the fed tensors that an
// incomplete parameter still needs.
struct MultiheadAttention::StreamedLoad::State {
  const MultiheadAttention* module;
  ShapeMap shapes;
  std::map<std::string, DType> dtypes;   // of the tensors to feed
  Recipes recipes;
  std::vector<bool> stored;              // per recipe
  std::set<std::string> fed;
  std::map<std::string, std::vector<float>> kept;
  ProjectionWeights staged;
  std::map<std::string, std::vector<float>> others;  // non-projection parameters, for FinishLoad
};

MultiheadAttention::StreamedLoad::StreamedLoad() = default;
MultiheadAttention::StreamedLoad::~StreamedLoad() = default;

namespace {

// FeedLoad's and FinishLoad's error for a load this module has not started
// or has finished.
Status NoLoad() {
  return Status::InvalidArgument(
      "safetensors: no load started on this module (StartLoad), or it was finished already");
}

}  // namespace

Status MultiheadAttention::StartLoad(const SafetensorsFile& file, const WeightOptions& options,
                                     StreamedLoad* out, std::vector<std::string>* names) const {
  try {
    auto s = std::make_unique<StreamedLoad::State>();
    s->module = this;
    s->shapes = TensorShapes(file);
    MHA_RETURN_IF_ERROR(Plan(s->shapes, options, &s->recipes));
    std::set<std::string> params;
    for (const ParameterRecipe& recipe : s->recipes.list) params.insert(recipe.name);
    MHA_RETURN_IF_ERROR(MissingError(MissingParameters(params), s->recipes.message_prefix));
    const std::set<std::string> used = UsedTensors(s->recipes.list);
    for (const std::string& name : used) s->dtypes[name] = file.tensors.at(name).dtype;
    const auto [in_type, out_type] =
        WeightTypes(config_.weights_dtype, s->recipes.list, s->dtypes);
    s->staged = impl_->NewWeights(in_type, out_type);
    s->staged.Reserve();
    s->stored.assign(s->recipes.list.size(), false);
    names->assign(used.begin(), used.end());
    out->state_ = std::move(s);
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("safetensors: not enough memory for the weights");
  }
}

Status MultiheadAttention::FeedLoad(StreamedLoad* load, const std::string& name,
                                    const uint8_t* data) const {
  if (load->state_ == nullptr || load->state_->module != this) return NoLoad();
  StreamedLoad::State& s = *load->state_;
  if (!s.dtypes.count(name) || s.fed.count(name)) {
    return Status::InvalidArgument("safetensors: tensor '" + name +
                                   "' is not one this load reads, or was given already");
  }
  const auto uses = [](const ParameterRecipe& recipe, const std::string& tensor) {
    return std::any_of(recipe.pieces.begin(), recipe.pieces.end(),
                       [&](const Piece& piece) { return piece.tensor == tensor; });
  };
  try {
    std::map<std::string, const float*> sources;
    for (const auto& [kept, floats] : s.kept) sources[kept] = floats.data();
    // F32 data is read where it is (WebAssembly and the native targets are
    // little-endian), so that only the weights and this tensor take memory.
    std::vector<float> converted;
    if (s.dtypes.at(name) == DType::kF32 && data != nullptr &&
        reinterpret_cast<uintptr_t>(data) % alignof(float) == 0) {
      sources[name] = reinterpret_cast<const float*>(data);
    } else {
      SafetensorsEntry entry{s.dtypes.at(name), s.shapes.at(name), data,
                             static_cast<size_t>(NumElements(s.shapes.at(name))) *
                                 DTypeSize(s.dtypes.at(name))};
      MHA_RETURN_IF_ERROR(ToFloat32(name, entry, &converted));
      sources[name] = converted.data();
    }
    s.fed.insert(name);
    for (size_t i = 0; i < s.recipes.list.size(); ++i) {
      const ParameterRecipe& recipe = s.recipes.list[i];
      std::deque<std::vector<float>> assembled;  // one parameter's at a time
      const bool ready = std::all_of(recipe.pieces.begin(), recipe.pieces.end(),
          [&](const Piece& piece) { return piece.tensor.empty() || s.fed.count(piece.tensor); });
      if (s.stored[i] || !ready) continue;
      const TensorView p = BuildParameter(recipe, s.shapes, sources, &assembled);
      const Status status = CheckParameter(recipe.name, p.data, p.shape);
      if (!status.ok()) return Status(status.code(), s.recipes.message_prefix + status.message());
      const int64_t size = NumElements(p.shape);
      if (IsProjection(recipe.name)) {
        impl_->StoreParameter(recipe.name, p.data, size, &s.staged);
      } else {
        s.others[recipe.name].assign(p.data, p.data + size);
      }
      s.stored[i] = true;
    }
    // Kept: the tensors a parameter not yet stored still needs.
    for (const auto& [tensor, floats] : sources) {
      bool needed = false;
      for (size_t i = 0; i < s.recipes.list.size(); ++i) {
        needed = needed || (!s.stored[i] && uses(s.recipes.list[i], tensor));
      }
      if (!needed) {
        s.kept.erase(tensor);
      } else if (!s.kept.count(tensor)) {
        s.kept[tensor].assign(floats, floats + NumElements(s.shapes.at(tensor)));
      }
    }
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("safetensors: not enough memory to convert tensor '" + name + "'");
  }
}

Status MultiheadAttention::FinishLoad(StreamedLoad* load) {
  if (load->state_ == nullptr || load->state_->module != this) return NoLoad();
  StreamedLoad::State& s = *load->state_;
  if (std::count(s.stored.begin(), s.stored.end(), false) != 0) {
    return Status::InvalidArgument("safetensors: the load was finished before every tensor "
                                   "it reads was given");
  }
  Impl& m = *impl_;
  try {
    std::set<std::string> loaded = m.loaded;
    for (const ParameterRecipe& recipe : s.recipes.list) loaded.insert(recipe.name);
    // Nothing below allocates: the module changes all at once.
    std::lock_guard<std::mutex> lock(m.mutex);
    for (const auto& [name, data] : s.others) {
      m.StoreParameter(name, data.data(), static_cast<int64_t>(data.size()), &m.weights);
    }
    m.weights = std::move(s.staged);
    m.loaded.swap(loaded);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("safetensors: not enough memory to finish the load");
  }
  load->state_.reset();  // its weights are the module's now
  return Status::Ok();
}

}  // namespace mha
