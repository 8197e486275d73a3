// ScaledDotProductAttention: F.scaled_dot_product_attention (PyTorch 2.x)
// over (B, H, L, E) or (B, L, E) tensors, on the same attention kernel.
#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <new>

#include "src/attention/attention.h"
#include "src/core/attention_call.h"
#include "src/core/kv_cache_internal.h"
#include "src/scaled_dot_product_attention.h"

namespace mha {
namespace {

// Right-aligns the mask's dims against (B, H, L, S) (or (B, L, S)) and
// returns each dim's stride in the mask, 0 where it broadcasts.
Status MaskStrides(const MaskView& mask, const Shape& target, std::vector<size_t>* strides) {
  const Shape& shape = mask.shape;
  const std::string expected = "a shape broadcastable to " + ShapeString(target) +
                               " with the last dim equal to S";
  if (shape.size() < 2 || shape.size() > target.size() || shape.back() != target.back()) {
    return Status::InvalidArgument("attn_mask: expected " + expected + ", got " +
                                   ShapeString(shape));
  }
  strides->assign(target.size(), 0);
  size_t stride = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    const size_t dim = shape.size() - 1 - i;
    const size_t t = target.size() - 1 - i;
    if (shape[dim] != target[t] && shape[dim] != 1) {
      return Status::InvalidArgument("attn_mask: expected " + expected + ", got " +
                                     ShapeString(shape));
    }
    (*strides)[t] = shape[dim] == 1 && target[t] != 1 ? 0 : stride;
    stride *= shape[dim];
  }
  return Status::Ok();
}

Status CheckTensor(const char* arg, const TensorView& t) {
  if (t.shape.size() != 3 && t.shape.size() != 4) {
    return Status::InvalidArgument(std::string(arg) +
                                   ": expected a 4-D (B, H, seq, dim) or 3-D (B, seq, dim) tensor, "
                                   "got shape " + ShapeString(t.shape));
  }
  return CheckDimsAndData(arg, t.shape, t.data);
}

// The problem's dims once the tensors (and the cache) are checked.
struct SdpaDims {
  size_t rank = 0;
  int64_t B = 0, H = 1, L = 0, E = 0;  // query (B, H, L, E)
  int64_t Hkv = 1, S = 0, Ev = 0;      // key (B, Hkv, S, E), value (B, Hkv, S, Ev): new rows
  int64_t P = 0;                       // cached keys before the call
  std::vector<size_t> mask_strides;    // per dim of (B, H, L, T) or (B, L, T), 0: broadcast
};

Status CheckCache(const KVCache& cache, const SdpaDims& d, int64_t window_left) {
  if (KVCacheAccess::Owner(cache) != 0) {
    return Status::InvalidArgument(KVCacheAccess::Describe(cache) + " belongs to a MultiheadAttention module; "
                                   "scaled_dot_product_attention takes a cache from createKVCache");
  }
  const KVCacheConfig& c = cache.config();
  if (c.batch_size != d.B || c.num_kv_heads != d.Hkv || c.head_dim != d.E ||
      c.v_head_dim != d.Ev) {
    return Status::InvalidArgument(
        KVCacheAccess::Describe(cache) + " does not match this call: query, key and value give batch_size " +
        std::to_string(d.B) + ", num_kv_heads " + std::to_string(d.Hkv) + ", head_dim " +
        std::to_string(d.E) + ", v_head_dim " + std::to_string(d.Ev));
  }
  return KVCacheAccess::CheckAppend(cache, d.S, window_left);
}

Status CheckSdpa(const TensorView& query, const TensorView& key, const TensorView& value,
                 const SdpaOptions& options, SdpaDims* d) {
  MHA_RETURN_IF_ERROR(CheckTensor("query", query));
  const bool no_keys = key.absent() && value.absent();
  if (no_keys && options.cache == nullptr) {
    return Status::InvalidArgument("key, value: required without a cache");
  }
  const size_t rank = d->rank = query.shape.size();
  if (!no_keys) {
    MHA_RETURN_IF_ERROR(CheckTensor("key", key));
    MHA_RETURN_IF_ERROR(CheckTensor("value", value));
    if (key.shape.size() != rank || value.shape.size() != rank) {
      return Status::InvalidArgument("key, value: expected " + std::to_string(rank) +
                                     "-D tensors like query " + ShapeString(query.shape) +
                                     ", got key " + ShapeString(key.shape) + " and value " +
                                     ShapeString(value.shape));
    }
  }
  // Leading (batch, heads) dims, then sequence and feature dims.
  d->B = query.shape[0];
  d->H = rank == 4 ? query.shape[1] : 1;
  d->L = query.shape[rank - 2];
  d->E = query.shape[rank - 1];
  if (no_keys) {
    d->Hkv = options.cache->config().num_kv_heads;
    d->Ev = options.cache->config().v_head_dim;
  } else {
    d->Hkv = rank == 4 ? key.shape[1] : 1;
    d->S = key.shape[rank - 2];
    d->Ev = value.shape[rank - 1];
    const bool grouped = options.enable_gqa && d->Hkv > 0 && d->H % d->Hkv == 0;
    Shape k_expected = query.shape;
    if (rank == 4 && grouped) k_expected[1] = d->Hkv;
    k_expected[rank - 2] = d->S;
    Shape v_expected = k_expected;
    v_expected[rank - 1] = d->Ev;
    if (key.shape != k_expected) {
      return Status::InvalidArgument(
          "key: expected shape " + ShapeString(k_expected) + " (query's batch dims" +
          (options.enable_gqa ? ", heads dividing query's" : "") + " and E), got " +
          ShapeString(key.shape));
    }
    if (value.shape != v_expected) {
      return Status::InvalidArgument("value: expected shape " + ShapeString(v_expected) +
                                     " (key's batch dims and S), got " + ShapeString(value.shape));
    }
  }
  if (options.cache != nullptr) {
    if (d->H % d->Hkv != 0 || (!options.enable_gqa && d->H != d->Hkv)) {
      return Status::InvalidArgument(
          KVCacheAccess::Describe(*options.cache) + ": query has " + std::to_string(d->H) + " heads; " +
          (options.enable_gqa ? "they must be a multiple of the cache's num_kv_heads"
                              : "without enable_gqa they must equal the cache's num_kv_heads"));
    }
    MHA_RETURN_IF_ERROR(CheckCache(*options.cache, *d, options.window.left));
    d->P = options.cache->length();
  }
  if (d->E == 0 || d->P + d->S == 0) {
    return Status::InvalidArgument("key: expected S >= 1 and E >= 1, got shape " +
                                   ShapeString(key.shape) +
                                   (options.cache != nullptr ? " and an empty cache" : ""));
  }
  MHA_RETURN_IF_ERROR(CheckScoreOptions({options.scale, options.softcap, options.window}, kSdpaScoreRules));
  for (const auto& [name, t] : {std::make_pair("sinks", &options.sinks),
                                std::make_pair("alibi_slopes", &options.alibi_slopes)}) {
    if (t->data != nullptr && t->shape != Shape{d->H}) {
      return Status::InvalidArgument(std::string(name) + ": expected shape " +
                                     ShapeString(Shape{d->H}) + " (one per query head), got " +
                                     ShapeString(t->shape));
    }
  }
  if (options.is_causal && options.attn_mask.present()) {
    return Status::InvalidArgument("attn_mask: must not be given together with is_causal");
  }
  return Status::Ok();
}

// The mask against (B, H, L, T); the output and a converted bool mask must
// be addressable, or their sizes and offsets would wrap around (size_t is 32
// bits in WebAssembly).
Status CheckMaskAndOutput(const TensorView& query, const TensorView& value,
                          const SdpaOptions& options, SdpaDims* d, Shape* out_shape) {
  const int64_t T = d->P + d->S;
  const Shape target = d->rank == 4 ? Shape{d->B, d->H, d->L, T} : Shape{d->B, d->L, T};
  if (options.attn_mask.present()) {
    MHA_RETURN_IF_ERROR(MaskStrides(options.attn_mask, target, &d->mask_strides));
    MHA_RETURN_IF_ERROR(
        CheckDimsAndData("attn_mask", options.attn_mask.shape, options.attn_mask.data()));
  }
  *out_shape = query.shape;
  (*out_shape)[d->rank - 1] = d->Ev;
  if (!Addressable(std::max(ElementCount(*out_shape), ElementCount(options.attn_mask.shape)))) {
    return Status::OutOfMemory("out of memory for query " +
                               ShapeString(query.shape) + " and value " + ShapeString(value.shape) +
                               ": the output would exceed the address space");
  }
  return Status::Ok();
}

// The call's plan (MakePlan decides its kernel, once).
AttentionPlan Plan(const SdpaDims& d, const SdpaOptions& options) {
  const float scale =
      options.scale != 0.0f ? options.scale : 1.0f / std::sqrt(static_cast<float>(d.E));
  return MakePlan({d.B, d.H, d.Hkv, d.L, d.S, d.P, d.E, d.Ev}, 0, false, options.is_causal,
                  {scale, options.softcap, options.window});
}

// The stages on checked inputs (attention_call.h). Throws std::bad_alloc,
// leaving the cache as it was.
void Run(const AttentionPlan& plan, const SdpaDims& d, const TensorView& query,
         const TensorView& key, const TensorView& value, const SdpaOptions& options,
         Tensor* output, ThreadPool* pool) {
  const size_t H = plan.H, L = plan.L, E = plan.qk_dim, Ev = plan.v_dim;
  const size_t S = plan.S, Hkv = plan.Hkv;
  std::vector<float> mask_storage;
  output->data.assign(plan.N * H * L * Ev, 0.0f);
  HeadSources sources;
  sources.q = {query.data, H * L * E, L * E, E};
  sources.out = {output->data.data(), H * L * Ev, L * Ev, Ev};
  KVRows rows;
  rows.keys = key.data;
  rows.values = value.data;
  rows.k_batch = Hkv * S * E;
  rows.k_head = S * E;
  rows.k_step = E;
  rows.v_batch = Hkv * S * Ev;
  rows.v_head = S * Ev;
  rows.v_step = Ev;
  sources.kv = AppendKeys(options.cache, rows, S);
  sources.sinks = options.sinks.data;
  sources.alibi_slopes = options.alibi_slopes.data;
  if (const float* mask = AdditiveMask(options.attn_mask, 0, &mask_storage)) {
    const std::vector<size_t>& strides = d.mask_strides;
    sources.mask = {mask, strides[0], d.rank == 4 ? strides[1] : 0, strides[d.rank - 2]};
  }
  // One grow-only scratch per calling thread: no allocation per call.
  thread_local AlignedBuffer scratch;
  std::vector<kernels::AttentionHead> heads;
  FillHeads(plan, sources, &heads);
  if (L > 0 && Ev > 0) RunAttentionHeads(heads, plan.kernel, pool, &scratch);
  CommitKeys(options.cache, plan.T());
}

}  // namespace

Status ScaledDotProductAttention(const TensorView& query, const TensorView& key,
                                 const TensorView& value, const SdpaOptions& options,
                                 Tensor* output, ThreadPool* pool) {
  std::unique_lock<std::mutex> cache_lock;
  if (options.cache != nullptr) cache_lock = KVCacheAccess::Lock(*options.cache);
  try {  // the checks allocate too (shapes, messages)
    SdpaDims d;
    Shape out_shape;
    MHA_RETURN_IF_ERROR(CheckSdpa(query, key, value, options, &d));
    MHA_RETURN_IF_ERROR(CheckMaskAndOutput(query, value, options, &d, &out_shape));
    output->shape = out_shape;
    const AttentionPlan plan = Plan(d, options);
    KVCache* cache = options.cache;
    if (cache != nullptr) KVCacheAccess::SaveOverwritten(*cache, plan.S);
    try {
      Run(plan, d, query, key, value, options, output, pool);
    } catch (...) {
      if (cache != nullptr) KVCacheAccess::Abandon(*cache, plan.S);
      throw;
    }
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("out of memory for query " +
                               ShapeString(query.shape) + " and key " + ShapeString(key.shape));
  } catch (const std::exception& e) {
    return Status::OutOfMemory(std::string("scaled_dot_product_attention: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace mha
