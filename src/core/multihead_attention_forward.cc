// MultiheadAttention::Forward: input validation, projections, attention over
// (batch, head) and the output projection.
#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include "src/attention/attention.h"
#include "src/core/kv_cache_internal.h"
#include "src/attention/linear.h"
#include "src/multihead_attention.h"
#include "src/core/multihead_attention_impl.h"
#include "src/attention/rotary.h"

namespace mha {
namespace {


std::string Expected(const Shape& shape, const std::string& names) {
  return ShapeString(shape) + " " + names;
}

// Checks one of query/key/value against its expected (seq, batch, features).
Status CheckInput(const char* arg, const char* seq_name, const TensorView& t, const ForwardPlan& dims,
                  int64_t seq, int64_t features, bool batch_first) {
  MHA_RETURN_IF_ERROR(CheckDimsAndData(arg, t.shape, t.data));
  const Shape expected = !dims.batched ? Shape{seq, features}
                         : batch_first ? Shape{dims.N, seq, features}
                                       : Shape{seq, dims.N, features};
  if (t.shape == expected) return Status::Ok();
  const std::string names =
      !dims.batched ? std::string("(") + seq_name + ", features)"
      : batch_first ? std::string("(N, ") + seq_name + ", features) with batch_first"
                    : std::string("(") + seq_name + ", N, features)";
  return Status::InvalidArgument(std::string(arg) + ": expected shape " +
                                 Expected(expected, names) + ", got " + ShapeString(t.shape));
}

Status CheckMask(const char* arg, const MaskView& mask, const std::vector<Shape>& allowed,
                 const std::string& names) {
  if (!mask.present()) return Status::Ok();
  MHA_RETURN_IF_ERROR(CheckDimsAndData(arg, mask.shape, mask.data()));
  for (const Shape& shape : allowed) {
    if (mask.shape == shape) return Status::Ok();
  }
  std::string expected;
  for (const Shape& shape : allowed) expected += (expected.empty() ? "" : " or ") + ShapeString(shape);
  return Status::InvalidArgument(std::string(arg) + ": expected shape " + expected + " " + names +
                                 ", got " + ShapeString(mask.shape));
}

bool Absent(const TensorView& t) { return t.data == nullptr && t.shape.empty(); }

// A cache must be this module's, fit the batch and the new keys.
Status CheckCache(const MultiheadAttentionConfig& c, uint64_t module_id, const KVCache& cache,
                  const ForwardPlan& dims) {
  if (c.add_bias_kv || c.add_zero_attn) {
    return Status::InvalidArgument("cache: add_bias_kv and add_zero_attn cannot be used with a "
                                   "cache");
  }
  const uint64_t owner = KVCacheAccess::Owner(cache);
  if (owner != module_id) {
    return Status::InvalidArgument(
        KVCacheAccess::Describe(cache) +
        (owner == 0 ? " was made by createKVCache for scaled_dot_product_attention"
                    : " belongs to another module") +
        "; use this module's createKVCache");
  }
  if (cache.config().batch_size != dims.N) {
    return Status::InvalidArgument(KVCacheAccess::Describe(cache) + " holds batch size " +
                                   std::to_string(cache.config().batch_size) +
                                   ", but query has batch size " + std::to_string(dims.N));
  }
  return KVCacheAccess::CheckAppend(cache, dims.S);
}

Status CheckForward(const MultiheadAttentionConfig& c, uint64_t module_id,
                    const TensorView& query, const TensorView& key, const TensorView& value,
                    const ForwardOptions& o, ForwardPlan* dims) {
  const size_t rank = query.shape.size();
  if (rank != 2 && rank != 3) {
    return Status::InvalidArgument("query: expected a 3-D (L, N, E) / (N, L, E) or 2-D (L, E) "
                                   "tensor, got shape " + ShapeString(query.shape));
  }
  const bool no_keys = Absent(key) && Absent(value);
  if (no_keys && o.cache == nullptr) {
    return Status::InvalidArgument("key, value: required without a cache");
  }
  if (!no_keys && (key.shape.size() != rank || value.shape.size() != rank)) {
    return Status::InvalidArgument("key, value: expected " + std::to_string(rank) +
                                   "-D tensors like query " + ShapeString(query.shape) +
                                   (o.cache != nullptr ? " (or both absent with a cache)" : "") +
                                   ", got key " + ShapeString(key.shape) + " and value " +
                                   ShapeString(value.shape));
  }
  dims->batched = rank == 3;
  const bool bf = c.batch_first && dims->batched;
  dims->L = query.shape[bf ? 1 : 0];
  dims->S = no_keys ? 0 : key.shape[bf ? 1 : 0];
  if (dims->batched) dims->N = query.shape[bf ? 0 : 1];
  MHA_RETURN_IF_ERROR(CheckInput("query", "L", query, *dims, dims->L, c.embed_dim, bf));
  if (!no_keys) {
    MHA_RETURN_IF_ERROR(CheckInput("key", "S", key, *dims, dims->S, c.kdim, bf));
    MHA_RETURN_IF_ERROR(CheckInput("value", "S", value, *dims, dims->S, c.vdim, bf));
  }
  if (o.cache != nullptr) {
    MHA_RETURN_IF_ERROR(CheckCache(c, module_id, *o.cache, *dims));
    dims->P = o.cache->length();
  }
  // Keys attended: the cache's and the new ones.
  const int64_t N = dims->N, L = dims->L, T = dims->P + dims->S, H = c.num_heads;
  if (T == 0 && !c.add_bias_kv && !c.add_zero_attn) {
    return Status::InvalidArgument(o.cache != nullptr
        ? "key: expected at least one key; the cache is empty and key is absent"
        : "key: expected at least one key (S >= 1), got shape " + ShapeString(key.shape));
  }
  // Masks, when given (their messages are built here, not on every decoding step).
  if (o.key_padding_mask.present() || o.attn_mask.present()) {
    const std::string keys = o.cache != nullptr ? "T" : "S";
    const std::string cached = o.cache != nullptr
        ? " (T = " + std::to_string(T) + ": the cache's " + std::to_string(dims->P) + " keys and " +
              std::to_string(dims->S) + " new)"
        : "";
    if (dims->batched) {
      MHA_RETURN_IF_ERROR(CheckMask("key_padding_mask", o.key_padding_mask, {{N, T}},
                                    "(N, " + keys + ")" + cached));
      MHA_RETURN_IF_ERROR(CheckMask("attn_mask", o.attn_mask, {{L, T}, {N * H, L, T}},
                                    "(L, " + keys + ") or (N*num_heads, L, " + keys + ")" + cached));
    } else {
      MHA_RETURN_IF_ERROR(CheckMask("key_padding_mask", o.key_padding_mask, {{T}},
                                    "(" + keys + ") for unbatched input" + cached));
      MHA_RETURN_IF_ERROR(CheckMask("attn_mask", o.attn_mask, {{L, T}, {H, L, T}},
                                    "(L, " + keys + ") or (num_heads, L, " + keys +
                                        ") for unbatched input" + cached));
    }
  }
  // The largest buffers (projections, per-head weights, a converted 3-D mask)
  // must be addressable, or their sizes and offsets would wrap around.
  const int64_t num_extra = (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0);
  const double all_keys = static_cast<double>(T + num_extra);
  const double projections = static_cast<double>(N) * std::max({L, dims->S, T}) *
      (3.0 * std::max({c.embed_dim, c.kdim, c.vdim}) + 3.0 * H * std::max(c.qk_head_dim, c.v_head_dim));
  const double weights = o.need_weights ? static_cast<double>(N) * H * L * all_keys : 0.0;
  if (!Addressable(std::max({projections, weights, ElementCount(o.attn_mask.shape)}))) {
    return Status::OutOfMemory("forward: out of memory for query " + ShapeString(query.shape) +
                               " and key " + ShapeString(key.shape) +
                               ": its buffers would exceed the address space");
  }
  dims->kernel = ChooseAttentionKernel(static_cast<size_t>(L), o.need_weights,
                                       static_cast<size_t>(num_extra));
  return Status::Ok();
}

}  // namespace

Status MultiheadAttention::Forward(const TensorView& query, const TensorView& key,
                                   const TensorView& value, const ForwardOptions& options,
                                   ForwardResult* result, ThreadPool* pool) {
  // Cache before module: the order every caller locks them in.
  std::unique_lock<std::mutex> cache_lock;
  if (options.cache != nullptr) cache_lock = KVCacheAccess::Lock(*options.cache);
  Impl& m = *impl_;
  try {  // the checks allocate too (shapes, names)
    ForwardPlan plan;
    MHA_RETURN_IF_ERROR(CheckForward(config_, m.id, query, key, value, options, &plan));
    std::lock_guard<std::mutex> lock(m.mutex);
    if (!m.complete) {
      const std::vector<std::string> missing = MissingParameters(m.loaded);
      if (!missing.empty()) {
        return Status::FailedPrecondition("parameters not loaded: " + JoinNames(missing));
      }
      m.complete = true;
    }
    m.Run(config_, plan, query, key, value, options, result, pool);
  } catch (const std::bad_alloc&) {
    return Status::OutOfMemory("forward: out of memory for query " + ShapeString(query.shape) +
                               " and key " + ShapeString(key.shape));
  } catch (const std::exception& e) {
    return Status::OutOfMemory(std::string("forward: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace mha

namespace mha {

void MultiheadAttention::Impl::Run(const MultiheadAttentionConfig& c, const ForwardPlan& plan,
                                   const TensorView& query, const TensorView& key,
                                   const TensorView& value, const ForwardOptions& o,
                                   ForwardResult* result, ThreadPool* pool) {
  const bool batched = plan.batched;
  const int64_t L64 = plan.L, N64 = plan.N;
  const size_t L = plan.L, S = plan.S, N = plan.N, H = c.num_heads, E = c.embed_dim;
  const size_t dq = c.qk_head_dim, dv = c.v_head_dim, QK = qk, VV = vv, KK = kk, KV = kv;
  const size_t group = H / c.num_kv_heads;  // query heads per key/value head
  const bool bf = c.batch_first && batched;
  KVCache* cache = o.cache;
  // Keys before this call's (at positions 0 .. P-1) and all keys attended.
  const size_t P = plan.P, T = P + S;

  // Without weights or a cache, keys that key padding removes at the end of
  // a batch entry are never attended: their K and V rows are not computed
  // and attention stops before them. (Rows of one entry are contiguous when
  // the batch comes first or there is one.)
  const float* kpm = AdditiveMask(o.key_padding_mask, 1, &kpm_storage);
  live_keys.assign(N, T);
  bool trimmed = false;
  if (kpm != nullptr && !o.need_weights && cache == nullptr && (bf || N == 1)) {
    const float neg_inf = -std::numeric_limits<float>::infinity();
    for (size_t n = 0; n < N; ++n) {
      while (live_keys[n] > 0 && kpm[n * S + live_keys[n] - 1] == neg_inf) --live_keys[n];
      trimmed = trimmed || live_keys[n] < S;
    }
  }
  // The K and V rows to project: each entry's live keys, or all rows.
  const auto key_rows = [&](size_t col_begin,
                            size_t col_end) -> std::vector<PackedLinear::Block>& {
    key_blocks.clear();
    if (!trimmed) {
      key_blocks.push_back({0, S * N, col_begin, col_end});
    } else {
      for (size_t n = 0; n < N; ++n) {
        key_blocks.push_back({n * S, n * S + live_keys[n], col_begin, col_end});
      }
    }
    return key_blocks;
  };

  // Projections. Inputs are viewed as matrices of (seq * N) rows in memory
  // order; attention then reads each (n, h) with a row stride.
  float *Q, *K, *V;
  size_t q_ld, k_ld, v_ld;
  const bool self_attention = S > 0 && query.data == key.data && key.data == value.data &&
                              query.shape == key.shape && qkv_proj.out() > 0;
  if (self_attention) {
    q_ld = k_ld = v_ld = QK + KK + KV;
    // At least one row, so the K and V offsets below stay inside a real buffer when L * N == 0.
    float* buf = qkv.Get(std::max<size_t>(L * N, 1) * q_ld);
    // Q columns (rounded up to whole panels) for every row, K and V for live keys.
    const size_t align = qkv_proj.ColumnAlignment();
    const size_t split = (QK + align - 1) / align * align;
    std::vector<PackedLinear::Block>& blocks = key_rows(split, q_ld);
    blocks.push_back({0, L * N, 0, split});
    qkv_proj.Apply(query.data, E, blocks, buf, q_ld, pool);
    Q = buf;
    K = buf + QK;
    V = buf + QK + KK;
  } else {
    q_ld = QK;
    k_ld = KK;
    v_ld = KV;
    float* buf = qkv.Get(L * N * QK + S * N * (KK + KV) + 1);  // + 1: never null
    Q = buf;
    K = buf + L * N * QK;
    V = K + S * N * KK;
    q_proj.Apply(query.data, E, L * N, Q, QK, pool);
    if (S > 0) {
      k_proj.Apply(key.data, kdim, key_rows(0, KK), K, KK, pool);
      v_proj.Apply(value.data, vdim, key_rows(0, KV), V, KV, pool);
    }
  }
  if (c.rotary.enabled) {
    RotateRows(c.rotary, Q, q_ld, L, N, bf, H, dq, P, &rotary_table);
    RotateRows(c.rotary, K, k_ld, S, N, bf, c.num_kv_heads, dq, P, &rotary_table);
  }

  // Where attention reads head (n, g)'s keys: the new rows, or the cache
  // after they are appended to it.
  const size_t num_extra = (c.add_bias_kv ? 1 : 0) + (c.add_zero_attn ? 1 : 0);
  KVRows kv;  // the new rows, or the cache's (float16 ones read as stored)
  kv.keys = K;
  kv.values = V;
  kv.k_batch = bf ? S * k_ld : k_ld;  // entry n to n + 1
  kv.k_step = bf ? k_ld : N * k_ld;   // key j to j + 1
  kv.k_head = dq;
  kv.v_batch = bf ? S * v_ld : v_ld;
  kv.v_step = bf ? v_ld : N * v_ld;
  kv.v_head = dv;
  // Written rows count only after Grow, the last step: an error before it
  // leaves the cache as it was.
  if (cache != nullptr) {
    KVCacheAccess::Write(*cache, {K, kv.k_batch, kv.k_step, kv.k_head},
                         {V, kv.v_batch, kv.v_step, kv.v_head}, S);
    kv = KVCacheAccess::Read(*cache);
  }

  // Extra keys per head: bias_k / bias_v, then a zero key / value.
  float* extra_k = extras.Get(H * num_extra * (dq + dv) + 1);
  float* extra_v = extra_k + H * num_extra * dq;
  for (size_t h = 0; h < H; ++h) {
    float* ek = extra_k + h * num_extra * dq;
    float* ev = extra_v + h * num_extra * dv;
    const size_t g = h / group;
    if (c.add_bias_kv) {
      std::copy(bias_k.begin() + g * dq, bias_k.begin() + (g + 1) * dq, ek);
      std::copy(bias_v.begin() + g * dv, bias_v.begin() + (g + 1) * dv, ev);
    }
    if (c.add_zero_attn) {
      std::fill(ek + (num_extra - 1) * dq, ek + num_extra * dq, 0.0f);
      std::fill(ev + (num_extra - 1) * dv, ev + num_extra * dv, 0.0f);
    }
  }

  const float* mask = AdditiveMask(o.attn_mask, 1, &mask_storage);
  const bool mask_per_head = o.attn_mask.shape.size() == 3;

  const size_t keys = T + num_extra;
  // Per-head weights go straight into the result; averaged ones via scratch.
  float* weights_out = nullptr;
  if (o.need_weights && o.average_attn_weights) {
    weights_out = head_weights.Get(N * H * L * keys + 1);
    result->weights.data.resize(N * L * keys);
  } else if (o.need_weights) {
    result->weights.data.resize(N * H * L * keys);
    weights_out = result->weights.data.data();
  }
  result->output.data.resize(L * N * E);

  float* O = attn.Get(L * N * VV + 1);
  const size_t q_step = bf ? 1 : N;
  heads.clear();
  for (size_t n = 0; n < N; ++n) {
    const size_t q_row = bf ? n * L : n;
    for (size_t h = 0; h < H; ++h) {
      const size_t g = h / group;
      kernels::AttentionHead head;
      head.q = Q + q_row * q_ld + h * dq;
      head.q_stride = q_step * q_ld;
      kv.PointHead(n, g, &head);
      head.extra_k = extra_k + h * num_extra * dq;
      head.extra_v = extra_v + h * num_extra * dv;
      head.num_extra = num_extra;
      head.out = O + q_row * VV + h * dv;
      head.out_stride = q_step * VV;
      head.num_queries = L;
      head.masked_keys = live_keys[n];
      head.qk_dim = dq;
      head.v_dim = dv;
      head.scale = 1.0f / std::sqrt(static_cast<float>(dq));
      if (mask != nullptr) {
        head.mask = mask + (mask_per_head ? (n * H + h) * L * T : 0);
        head.mask_stride = T;
      }
      if (kpm != nullptr) head.key_bias = kpm + n * T;
      head.causal = o.is_causal;
      head.causal_offset = P;
      if (weights_out != nullptr) {
        head.weights = weights_out + (n * H + h) * L * keys;
        head.weights_stride = keys;
      }
      heads.push_back(head);
    }
  }
  RunAttentionHeads(heads, plan.kernel, pool, &scratch);

  out_proj.Apply(O, VV, L * N, result->output.data.data(), E, pool);
  result->output.shape = query.shape;
  if (!o.need_weights) {
    result->weights = Tensor();
  } else if (o.average_attn_weights) {
    std::fill(result->weights.data.begin(), result->weights.data.end(), 0.0f);
    for (size_t n = 0; n < N; ++n) {
      float* dst = result->weights.data.data() + n * L * keys;
      for (size_t h = 0; h < H; ++h) {
        const float* src = weights_out + (n * H + h) * L * keys;
        for (size_t i = 0; i < L * keys; ++i) dst[i] += src[i];
      }
      for (size_t i = 0; i < L * keys; ++i) dst[i] /= static_cast<float>(H);
    }
    result->weights.shape = batched ? Shape{N64, L64, int64_t(keys)} : Shape{L64, int64_t(keys)};
  } else {
    result->weights.shape = batched ? Shape{N64, int64_t(H), L64, int64_t(keys)}
                                    : Shape{int64_t(H), L64, int64_t(keys)};
  }
  // Last: the appended keys count from now on (nothing below can fail).
  if (cache != nullptr) KVCacheAccess::Grow(*cache, static_cast<int64_t>(T));
}

}  // namespace mha
