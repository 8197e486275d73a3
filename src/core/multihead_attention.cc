#include "src/multihead_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <new>
#include <set>
#include <utility>

#include "src/core/kv_cache_internal.h"
#include "src/core/multihead_attention_impl.h"

namespace mha {

namespace {

// Fills in rotary.dim and computes the table (RotaryTable's rules).
Status ResolveRotary(int64_t qk_head_dim, RotaryConfig* r, RotaryFrequencies* table) {
  if (r->dim == 0) {
    r->dim = r->inv_freq.empty() ? qk_head_dim : 2 * static_cast<int64_t>(r->inv_freq.size());
  }
  if (r->dim < 0 || r->dim % 2 != 0 || r->dim > qk_head_dim) {
    return Status::InvalidArgument("rotary.dim: expected an even number of features <= "
                                   "qk_head_dim (" + std::to_string(qk_head_dim) + "), got " +
                                   std::to_string(r->dim));
  }
  return RotaryTable(static_cast<size_t>(r->dim), r->base, r->scaling, r->inv_freq,
                     r->attention_factor, table);
}

}  // namespace

Status MultiheadAttention::Create(const MultiheadAttentionConfig& config,
                                  std::unique_ptr<MultiheadAttention>* out) {
  const MultiheadAttentionConfig& c = config;
  if (c.embed_dim <= 0) {
    return Status::InvalidArgument("embed_dim: expected a positive integer, got " +
                                   std::to_string(c.embed_dim));
  }
  if (c.num_heads <= 0) {
    return Status::InvalidArgument("num_heads: expected a positive integer, got " +
                                   std::to_string(c.num_heads));
  }
  if (c.kdim < 0 || c.vdim < 0 || c.qk_head_dim < 0 || c.v_head_dim < 0) {
    return Status::InvalidArgument(
        "kdim, vdim, qk_head_dim, v_head_dim: expected positive integers (or 0 for the default), "
        "got " + std::to_string(c.kdim) + ", " + std::to_string(c.vdim) + ", " +
        std::to_string(c.qk_head_dim) + ", " + std::to_string(c.v_head_dim));
  }
  if ((c.qk_head_dim == 0 || c.v_head_dim == 0) && c.embed_dim % c.num_heads != 0) {
    return Status::InvalidArgument("num_heads: embed_dim (" + std::to_string(c.embed_dim) +
                                   ") must be divisible by num_heads (" +
                                   std::to_string(c.num_heads) + ")");
  }
  MHA_RETURN_IF_ERROR(CheckOption(kModuleRules.dropout, c.dropout));
  if (c.embed_dim > kMaxDim || c.num_heads > kMaxDim || c.kdim > kMaxDim || c.vdim > kMaxDim ||
      c.qk_head_dim > kMaxDim || c.v_head_dim > kMaxDim) {
    return Status::InvalidArgument("config: dims above 2^24 are not supported");
  }
  if (c.num_kv_heads < 0 || c.num_kv_heads > c.num_heads ||
      (c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads != 0)) {
    return Status::InvalidArgument("num_kv_heads: expected a divisor of num_heads (" +
                                   std::to_string(c.num_heads) + ") or 0 for num_heads, got " +
                                   std::to_string(c.num_kv_heads));
  }
  if (static_cast<unsigned>(c.weights_dtype) > static_cast<unsigned>(WeightsDtype::kInt8)) {
    return Status::InvalidArgument("weights_dtype: unknown value " +
                                   std::to_string(static_cast<int>(c.weights_dtype)));
  }
  MultiheadAttentionConfig resolved = c;
  const int64_t head_dim = c.embed_dim / c.num_heads;
  if (resolved.kdim == 0) resolved.kdim = c.embed_dim;
  if (resolved.vdim == 0) resolved.vdim = c.embed_dim;
  if (resolved.qk_head_dim == 0) resolved.qk_head_dim = head_dim;
  if (resolved.v_head_dim == 0) resolved.v_head_dim = head_dim;
  if (resolved.num_kv_heads == 0) resolved.num_kv_heads = c.num_heads;
  MHA_RETURN_IF_ERROR(CheckScoreOptions({c.scale, c.softcap, c.window}, kModuleScoreRules));
  if (resolved.scale == 0.0f) {
    resolved.scale = 1.0f / std::sqrt(static_cast<float>(resolved.qk_head_dim));
  }
  for (const auto& [on, name] : {std::make_pair(c.window.enabled(), "window"),
                                 std::make_pair(c.alibi.enabled, "alibi")}) {
    if (on && (c.add_bias_kv || c.add_zero_attn)) {
      return Status::InvalidArgument(std::string(name) + ": cannot be combined with add_bias_kv "
                                     "or add_zero_attn (their keys have no position)");
    }
  }
  if (c.alibi.enabled) {
    std::vector<float>& slopes = resolved.alibi.slopes;
    if (slopes.empty()) slopes = AlibiSlopes(c.num_heads);
    if (static_cast<int64_t>(slopes.size()) != c.num_heads ||
        !std::all_of(slopes.begin(), slopes.end(), [](float s) { return std::isfinite(s); })) {
      return Status::InvalidArgument("alibi.slopes: expected num_heads (" +
                                     std::to_string(c.num_heads) + ") finite slopes, got " +
                                     std::to_string(slopes.size()));
    }
  }
  if (c.qk_norm.enabled) {
    MHA_RETURN_IF_ERROR(CheckOption(kModuleRules.qk_norm_eps, c.qk_norm.eps));
    MHA_RETURN_IF_ERROR(CheckOption(kModuleRules.qk_norm_weight_offset, c.qk_norm.weight_offset));
  }
  RotaryFrequencies rotary;
  if (c.rotary.enabled) {
    MHA_RETURN_IF_ERROR(ResolveRotary(resolved.qk_head_dim, &resolved.rotary, &rotary));
  }
  // Weights are allocated at load; a module whose weights the address space
  // cannot hold is refused here, as when they were allocated now ('auto' may
  // load float32 weights).
  const MultiheadAttentionConfig& r = resolved;
  const double inputs = static_cast<double>(r.num_heads * r.qk_head_dim) * r.embed_dim +
                        static_cast<double>(r.num_kv_heads * r.qk_head_dim) * r.kdim +
                        static_cast<double>(r.num_kv_heads * r.v_head_dim) * r.vdim +
                        static_cast<double>(r.num_heads * r.v_head_dim) * r.embed_dim;
  const double bytes_per_weight =
      r.weights_dtype == WeightsDtype::kAuto
          ? 4.0
          : static_cast<double>(kernels::WeightTypeBytes(StoredWeightType(r.weights_dtype, {})));
  if (inputs * bytes_per_weight >= static_cast<double>(SIZE_MAX)) {
    return Status::OutOfMemory("config: not enough memory for the parameters");
  }
  try {
    out->reset(new MultiheadAttention(resolved));
    (*out)->impl_->rotary = std::move(rotary);
  } catch (const std::exception&) {
    return Status::OutOfMemory("config: not enough memory for the parameters");
  }
  return Status::Ok();
}

std::vector<float> AlibiSlopes(int64_t num_heads) {
  const int64_t closest = int64_t{1} << static_cast<int>(std::floor(std::log2(num_heads)));
  std::vector<float> slopes;
  for (int64_t h = 0; h < closest; ++h) {
    slopes.push_back(static_cast<float>(std::exp2(-8.0 * double(h + 1) / double(closest))));
  }
  for (int64_t k = 0; k < num_heads - closest; ++k) {
    slopes.push_back(static_cast<float>(std::exp2(-4.0 * double(2 * k + 1) / double(closest))));
  }
  return slopes;
}

MultiheadAttention::MultiheadAttention(const MultiheadAttentionConfig& config)
    : config_(config), impl_(new Impl) {
  Impl& m = *impl_;
  const MultiheadAttentionConfig& c = config_;
  m.embed_dim = c.embed_dim;
  m.kdim = c.kdim;
  m.vdim = c.vdim;
  m.qk_norm_offset = c.qk_norm.weight_offset;
  static std::atomic<uint64_t> next_id{1};
  m.id = next_id.fetch_add(1);
  m.qk = c.num_heads * c.qk_head_dim;
  m.vv = c.num_heads * c.v_head_dim;
  m.kk = c.num_kv_heads * c.qk_head_dim;
  m.kv = c.num_kv_heads * c.v_head_dim;
  m.in_proj_packed = c.kdim == c.embed_dim && c.vdim == c.embed_dim && m.qk == c.embed_dim &&
                     m.vv == c.embed_dim && c.num_kv_heads == c.num_heads;
  if (c.add_bias_kv) {
    m.bias_k.assign(m.kk, 0.0f);
    m.bias_v.assign(m.kv, 0.0f);
  }
  if (c.sinks) m.sinks.assign(c.num_heads, 0.0f);
  if (c.qk_norm.enabled) {
    m.q_norm.assign(m.qk, 0.0f);
    m.k_norm.assign(m.kk, 0.0f);
    if (c.qk_norm.type == QkNormType::kLayer) {
      m.q_norm_bias.assign(m.qk, 0.0f);
      m.k_norm_bias.assign(m.kk, 0.0f);
    }
  }
  // 'auto' keeps float32 until a load says otherwise; nothing is allocated
  // before a load (or a forward, which needs every parameter loaded).
  const kernels::WeightType type = StoredWeightType(c.weights_dtype, kernels::WeightType::kFloat32);
  m.weights = m.NewWeights(type, type);
}

MultiheadAttention::~MultiheadAttention() = default;

namespace {

// The config of a module's caches but for batch_size, max_length, dtype,
// rolling and keep; an error for a module that cannot decode with a cache.
Status ModuleCacheConfig(const MultiheadAttentionConfig& m, KVCacheConfig* c) {
  if (m.add_bias_kv || m.add_zero_attn) {
    return Status::InvalidArgument(
        "cache: a module with add_bias_kv or add_zero_attn cannot decode with a cache");
  }
  c->num_kv_heads = m.num_kv_heads;
  c->head_dim = m.qk_head_dim;
  c->v_head_dim = m.v_head_dim;
  return Status::Ok();
}

// A cache of module `m` (whose Impl::id is `id`) with c's batch_size,
// max_length, dtype, rolling and keep.
Status ModuleCache(const MultiheadAttentionConfig& m, uint64_t id, KVCacheConfig c,
                   std::unique_ptr<KVCache>* out) {
  MHA_RETURN_IF_ERROR(ModuleCacheConfig(m, &c));
  return KVCacheAccess::Create(c, id, m.window.left, out);
}

}  // namespace

Status MultiheadAttention::CreateKVCache(int64_t batch_size, int64_t max_length,
                                         KVCacheDtype dtype, bool rolling,
                                         std::unique_ptr<KVCache>* out) const {
  return ModuleCache(config_, impl_->id, {batch_size, 0, 0, 0, max_length, dtype, rolling, -1},
                     out);
}

Status MultiheadAttention::CreateStreamingKVCache(int64_t batch_size, int64_t max_length,
                                                  KVCacheDtype dtype, int64_t keep,
                                                  std::unique_ptr<KVCache>* out) const {
  return ModuleCache(config_, impl_->id, {batch_size, 0, 0, 0, max_length, dtype, false, keep},
                     out);
}

Status MultiheadAttention::LoadKVCache(const uint8_t* bytes, size_t size,
                                       std::unique_ptr<KVCache>* out) const {
  KVCacheConfig c;
  MHA_RETURN_IF_ERROR(ModuleCacheConfig(config_, &c));
  return KVCacheAccess::Load(bytes, size, &c, impl_->id, config_.window.left, out);
}

std::vector<ParameterSpec> MultiheadAttention::Parameters() const {
  const Impl& m = *impl_;
  const MultiheadAttentionConfig& c = config_;
  std::vector<ParameterSpec> specs;
  if (m.in_proj_packed) {
    specs.push_back({"in_proj_weight", {3 * c.embed_dim, c.embed_dim}});
  } else {
    specs.push_back({"q_proj_weight", {m.qk, c.embed_dim}});
    specs.push_back({"k_proj_weight", {m.kk, c.kdim}});
    specs.push_back({"v_proj_weight", {m.kv, c.vdim}});
  }
  if (c.bias) specs.push_back({"in_proj_bias", {m.qk + m.kk + m.kv}});
  if (c.add_bias_kv) {
    specs.push_back({"bias_k", {1, 1, m.kk}});
    specs.push_back({"bias_v", {1, 1, m.kv}});
  }
  specs.push_back({"out_proj.weight", {c.embed_dim, m.vv}});
  if (c.bias) specs.push_back({"out_proj.bias", {c.embed_dim}});
  if (c.sinks) specs.push_back({"sinks", {c.num_heads}});
  if (c.qk_norm.enabled) {
    const bool all = c.qk_norm.over == QkNormOver::kAll;
    specs.push_back({"q_norm.weight", {all ? m.qk : c.qk_head_dim}});
    specs.push_back({"k_norm.weight", {all ? m.kk : c.qk_head_dim}});
  }
  return specs;
}

std::vector<ParameterSpec> MultiheadAttention::AcceptedParameters() const {
  const Impl& m = *impl_;
  std::vector<ParameterSpec> specs = Parameters();
  // With embed_dim-wide keys and values, in_proj_weight and the three
  // q/k/v_proj_weight hold the same numbers: either form loads.
  if (config_.kdim == config_.embed_dim && config_.vdim == config_.embed_dim) {
    if (m.in_proj_packed) {
      specs.push_back({"q_proj_weight", {m.qk, config_.embed_dim}});
      specs.push_back({"k_proj_weight", {m.kk, config_.embed_dim}});
      specs.push_back({"v_proj_weight", {m.kv, config_.embed_dim}});
    } else {
      specs.push_back({"in_proj_weight", {m.qk + m.kk + m.kv, config_.embed_dim}});
    }
  }
  // q/k norms over each head: a weight per head too; LayerNorm's optional bias.
  const QkNormConfig& n = config_.qk_norm;
  if (n.enabled && n.over == QkNormOver::kHead) {
    specs.push_back({"q_norm.weight", {config_.num_heads, config_.qk_head_dim}});
    specs.push_back({"k_norm.weight", {config_.num_kv_heads, config_.qk_head_dim}});
  }
  if (n.enabled && n.type == QkNormType::kLayer) {
    const size_t weights = specs.size();
    for (size_t i = 0; i < weights; ++i) {
      const std::string& name = specs[i].name;
      if (name == "q_norm.weight" || name == "k_norm.weight") {
        specs.push_back({name.substr(0, 7) + "bias", specs[i].shape});
      }
    }
  }
  return specs;
}

std::vector<std::string> MultiheadAttention::MissingParameters(
    const std::set<std::string>& have) const {
  std::vector<std::string> missing;
  const bool have_qkv =
      have.count("q_proj_weight") && have.count("k_proj_weight") && have.count("v_proj_weight");
  for (const ParameterSpec& spec : Parameters()) {
    if (have.count(spec.name)) continue;
    if (spec.name == "in_proj_weight" && have_qkv) continue;
    if (spec.name.size() == 13 && spec.name.compare(1, 12, "_proj_weight") == 0 &&
        have.count("in_proj_weight")) {
      continue;
    }
    missing.push_back(spec.name);
  }
  return missing;
}

Status MultiheadAttention::CheckQuantizable(const std::string& name, const float* data,
                                            int64_t size) const {
  const bool quantized = name == "in_proj_weight" || name == "q_proj_weight" ||
                         name == "k_proj_weight" || name == "v_proj_weight" ||
                         name == "out_proj.weight";
  if (config_.weights_dtype != WeightsDtype::kInt8 || !quantized) return Status::Ok();
  for (int64_t i = 0; i < size; ++i) {
    if (!std::isfinite(data[i])) {
      return Status::InvalidArgument(name + ": element " + std::to_string(i) + " is " +
                                     std::to_string(data[i]) +
                                     "; int8 weights must be finite (weights_dtype int8)");
    }
  }
  return Status::Ok();
}

Status MultiheadAttention::CheckParameter(const std::string& name, const float* data,
                                          const Shape& shape) const {
  std::vector<std::string> names, shapes;  // shapes: those accepted for `name`
  for (const ParameterSpec& spec : AcceptedParameters()) {
    names.push_back(spec.name);
    if (spec.name != name) continue;
    shapes.push_back(ShapeString(spec.shape));
    if (shape != spec.shape) continue;
    if (data == nullptr) return Status::InvalidArgument(name + ": data is null");
    return CheckQuantizable(name, data, NumElements(shape));
  }
  if (!shapes.empty()) {
    std::string expected = shapes[0];
    for (size_t i = 1; i < shapes.size(); ++i) expected += " or " + shapes[i];
    return Status::InvalidArgument(name + ": expected shape " + expected + ", got " +
                                   ShapeString(shape));
  }
  return Status::InvalidArgument("state_dict: unexpected parameter '" + name +
                                 "' for this configuration; expected one of: " + JoinNames(names));
}

Status MultiheadAttention::LoadParameter(const std::string& name, const float* data,
                                         const Shape& shape) {
  MHA_RETURN_IF_ERROR(CheckParameter(name, data, shape));
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mutex);
  try {
    m.weights.Reserve();
    m.loaded.insert(name);  // written next, which cannot fail
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory(name + ": not enough memory for the weights");
  }
  m.StoreParameter(name, data, NumElements(shape), &m.weights);
  return Status::Ok();
}

size_t MultiheadAttention::memory() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->WeightBytes();
}

}  // namespace mha
