// MultiheadAttention::Impl::Run: the forward pass on validated inputs as a
// pipeline of named stages over the call's plan (ForwardPlan), around the
// stages it shares with ScaledDotProductAttention (attention_call.h).
#include <algorithm>
#include <cmath>

#include "src/attention/rotary.h"
#include "src/core/multihead_attention_impl.h"

namespace mha {

void MultiheadAttention::Impl::Run(const MultiheadAttentionConfig& c, const ForwardPlan& plan,
                                   const TensorView& query, const TensorView& key,
                                   const TensorView& value, const ForwardOptions& o,
                                   ForwardResult* result, ThreadPool* pool) {
  const float* key_padding = TrimKeyPadding(plan, o);
  const Projections p = Project(plan, query, key, value, pool);
  if (c.qk_norm.enabled) Normalize(c, plan, p);
  if (c.rotary.enabled) Rotate(c, plan, p, o.positions);
  const HeadSources sources = Sources(c, plan, p, key_padding, o, result);
  FillHeads(plan.attention, sources, &heads);
  RunAttentionHeads(heads, plan.attention.kernel, pool, &scratch);
  Finish(plan, query, o, sources, result, pool);
  CommitKeys(o.cache, plan.attention.T());
}

const float* MultiheadAttention::Impl::TrimKeyPadding(const ForwardPlan& plan,
                                                      const ForwardOptions& o) {
  const AttentionPlan& a = plan.attention;
  const float* kpm = AdditiveMask(o.key_padding_mask, 1, &kpm_storage);
  const size_t T = a.T();
  live_keys.assign(a.N, T);
  trimmed = false;
  if (kpm == nullptr) return kpm;
  live_storage.resize(a.N * 2 * (T + 1));
  for (size_t n = 0; n < a.N; ++n) {
    size_t* from = live_storage.data() + n * 2 * (T + 1);
    kernels::LiveKeys(kpm + n * T, T, from, from + T + 1);
  }
  // Rows of one entry are contiguous when the batch comes first or there is one.
  if (o.need_weights || o.cache != nullptr || !(plan.batch_first || a.N == 1)) return kpm;
  for (size_t n = 0; n < a.N; ++n) {
    live_keys[n] = live_storage[n * 2 * (T + 1) + T + 1 + T];  // LiveKeys' to[T]
    trimmed = trimmed || live_keys[n] < T;
  }
  return kpm;
}

std::vector<PackedLinear::Block>& MultiheadAttention::Impl::KeyRows(const ForwardPlan& plan,
                                                                   size_t col_begin,
                                                                   size_t col_end) {
  const size_t S = plan.attention.S, N = plan.attention.N;
  key_blocks.clear();
  if (!trimmed) {
    key_blocks.push_back({0, S * N, col_begin, col_end});
  } else {
    for (size_t n = 0; n < N; ++n) {
      key_blocks.push_back({n * S, n * S + live_keys[n], col_begin, col_end});
    }
  }
  return key_blocks;
}

Projections MultiheadAttention::Impl::Project(const ForwardPlan& plan, const TensorView& query,
                                              const TensorView& key, const TensorView& value,
                                              ThreadPool* pool) {
  const AttentionPlan& a = plan.attention;
  const size_t L = a.L, S = a.S, N = a.N, E = embed_dim, QK = qk, KK = kk, KV = kv;
  if (weights.qkv_proj.out() > 0) return ProjectFused(plan, query, key, value, pool);
  Projections p;
  p.q_ld = QK;
  p.k_ld = KK;
  p.v_ld = KV;
  p.q = qkv.Get(L * N * QK + S * N * (KK + KV) + 1);  // + 1: never null
  p.k = p.q + L * N * QK;
  p.v = p.k + S * N * KK;
  weights.q_proj.Apply(query.data, E, L * N, p.q, QK, pool);
  if (S > 0) {
    weights.k_proj.Apply(key.data, kdim, KeyRows(plan, 0, KK), p.k, KK, pool);
    weights.v_proj.Apply(value.data, vdim, KeyRows(plan, 0, KV), p.v, KV, pool);
  }
  return p;
}

Projections MultiheadAttention::Impl::ProjectFused(const ForwardPlan& plan,
                                                   const TensorView& query, const TensorView& key,
                                                   const TensorView& value, ThreadPool* pool) {
  const AttentionPlan& a = plan.attention;
  const size_t L = a.L, S = a.S, N = a.N, E = embed_dim, QK = qk, KK = kk, KV = kv;
  PackedLinear& w = weights.qkv_proj;
  const size_t align = w.ColumnAlignment();
  Projections p;
  if (S > 0 && query.data == key.data && key.data == value.data && query.shape == key.shape) {
    p.q_ld = p.k_ld = p.v_ld = QK + KK + KV;
    // At least one row, so the K and V offsets stay inside a real buffer when L * N == 0.
    p.q = qkv.Get(std::max<size_t>(L * N, 1) * p.q_ld);
    // Q columns (rounded up to whole panels) for every row, K and V for live keys.
    const size_t split = (QK + align - 1) / align * align;
    std::vector<PackedLinear::Block>& blocks = KeyRows(plan, split, p.q_ld);
    blocks.push_back({0, L * N, 0, split});
    w.Apply(query.data, E, blocks, p.q, p.q_ld, pool);
    p.k = p.q + QK;
    p.v = p.k + KK;
    return p;
  }
  // Apart (cross-attention): each of q, k, v runs on its columns of the
  // packed weights, with no copy of them. A key row holds columns from the
  // panel of K's first one on (ld apart), from key for K and from value for
  // V; V goes first, so that K's columns of the panel they share are K's.
  const size_t k_col = QK / align * align, v_col = (QK + KK) / align * align;
  p.q_ld = QK;
  p.k_ld = p.v_ld = QK + KK + KV - k_col;
  // At least one query row, so that the key rows' column 0 (k_col floats
  // before them) lies inside the buffer.
  const size_t q_floats = std::max<size_t>(L * N, 1) * QK;
  p.q = qkv.Get(q_floats + S * N * p.k_ld);
  float* key_base = p.q + q_floats - k_col;  // column 0 of the key rows
  p.k = key_base + QK;
  p.v = key_base + QK + KK;
  key_blocks.assign(1, {0, L * N, 0, QK});  // the query rows (the vector is reused)
  w.Apply(query.data, E, key_blocks, p.q, QK, pool);
  if (S > 0) {
    w.Apply(value.data, E, KeyRows(plan, v_col, QK + KK + KV), key_base, p.k_ld, pool);
    w.Apply(key.data, E, KeyRows(plan, k_col, QK + KK), key_base, p.k_ld, pool);
  }
  return p;
}

void MultiheadAttention::Impl::Normalize(const MultiheadAttentionConfig& c,
                                         const ForwardPlan& plan, const Projections& p) {
  const AttentionPlan& a = plan.attention;
  const bool all = c.qk_norm.over == QkNormOver::kAll;
  const bool layer = c.qk_norm.type == QkNormType::kLayer;
  const float* qb = layer ? q_norm_bias.data() : nullptr;
  const float* kb = layer ? k_norm_bias.data() : nullptr;
  for (size_t r = 0; r < a.L * a.N; ++r) {
    kernels::NormalizeGroups(p.q + r * p.q_ld, all ? 1 : a.H, all ? qk : a.qk_dim, layer,
                             c.qk_norm.eps, q_norm.data(), qb);
  }
  for (size_t r = 0; r < a.S * a.N; ++r) {
    kernels::NormalizeGroups(p.k + r * p.k_ld, all ? 1 : a.Hkv, all ? kk : a.qk_dim, layer,
                             c.qk_norm.eps, k_norm.data(), kb);
  }
}

Rotation MultiheadAttention::Impl::KeyRotation(const MultiheadAttentionConfig& c) const {
  return {static_cast<size_t>(c.rotary.dim), rotary.inv_freq.data(), rotary.attention_factor,
          c.rotary.interleaved};
}

void MultiheadAttention::Impl::Rotate(const MultiheadAttentionConfig& c, const ForwardPlan& plan,
                                      const Projections& p, const int32_t* positions) {
  const AttentionPlan& a = plan.attention;
  const Rotation rotation = KeyRotation(c);
  const bool bf = plan.batch_first;
  // One table for queries and keys: key rows equal query rows when
  // positions are given (checked at the call), else key s sits at P + s too.
  const bool per_batch = positions != nullptr;
  FillRotaryTable(rotation, per_batch ? a.N * a.L : std::max(a.L, a.S), a.P, positions,
                  &rotary_table);
  const float* table = rotary_table.data();
  RotateRows(rotation, table, per_batch, p.q, p.q_ld, a.L, a.N, bf, a.H, a.qk_dim);
  RotateRows(rotation, table, per_batch, p.k, p.k_ld, a.S, a.N, bf, a.Hkv, a.qk_dim);
}

HeadSources MultiheadAttention::Impl::Sources(const MultiheadAttentionConfig& c,
                                              const ForwardPlan& plan, const Projections& p,
                                              const float* key_padding, const ForwardOptions& o,
                                              ForwardResult* result) {
  const AttentionPlan& a = plan.attention;
  const size_t L = a.L, S = a.S, N = a.N, H = a.H, dq = a.qk_dim, dv = a.v_dim;
  const size_t keys = a.Keys(), extra = a.num_extra, group = H / a.Hkv;
  const bool bf = plan.batch_first;
  HeadSources s;
  // Rows are (seq, N) or (N, seq) in memory: entry n's first row and the step between rows.
  s.q = {p.q, bf ? L * p.q_ld : p.q_ld, dq, (bf ? 1 : N) * p.q_ld};
  KVRows rows;
  rows.keys = p.k;
  rows.values = p.v;
  rows.k_batch = bf ? S * p.k_ld : p.k_ld;
  rows.k_step = bf ? p.k_ld : N * p.k_ld;
  rows.k_head = dq;
  rows.v_batch = bf ? S * p.v_ld : p.v_ld;
  rows.v_step = bf ? p.v_ld : N * p.v_ld;
  rows.v_head = dv;
  s.kv = AppendKeys(o.cache, rows, S);
  // Extra keys per query head: bias_k / bias_v, then a zero key / value.
  float* extra_k = extras.Get(H * extra * (dq + dv) + 1);
  float* extra_v = extra_k + H * extra * dq;
  for (size_t h = 0; h < H && extra > 0; ++h) {
    float* ek = extra_k + h * extra * dq;
    float* ev = extra_v + h * extra * dv;
    const size_t g = h / group;
    if (c.add_bias_kv) {
      std::copy(bias_k.begin() + g * dq, bias_k.begin() + (g + 1) * dq, ek);
      std::copy(bias_v.begin() + g * dv, bias_v.begin() + (g + 1) * dv, ev);
    }
    if (c.add_zero_attn) {
      std::fill(ek + (extra - 1) * dq, ek + extra * dq, 0.0f);
      std::fill(ev + (extra - 1) * dv, ev + extra * dv, 0.0f);
    }
  }
  s.extra_k = extra_k;
  s.extra_v = extra_v;
  // attn_mask (L, T) for every head or (N * H, L, T).
  const size_t T = a.T();
  const bool per_head = o.attn_mask.shape.size() == 3;
  s.mask = {AdditiveMask(o.attn_mask, 1, &mask_storage), per_head ? H * L * T : 0,
            per_head ? L * T : 0, T};
  s.key_bias = key_padding;
  s.live = key_padding != nullptr ? live_storage.data() : nullptr;
  s.masked_keys = live_keys.data();
  s.sinks = c.sinks ? sinks.data() : nullptr;
  s.alibi_slopes = c.alibi.enabled ? c.alibi.slopes.data() : nullptr;
  s.alibi_symmetric = c.alibi.symmetric;
  // Per-head weights go straight into the result; averaged ones via scratch.
  if (o.need_weights && o.average_attn_weights) {
    s.weights = head_weights.Get(N * H * L * keys + 1);
    result->weights.data.resize(N * L * keys);
  } else if (o.need_weights) {
    result->weights.data.resize(N * H * L * keys);
    s.weights = result->weights.data.data();
  }
  result->output.data.resize(L * N * static_cast<size_t>(embed_dim));
  const size_t VV = static_cast<size_t>(vv);
  float* out = attn.Get(L * N * VV + 1);
  s.out = {out, bf ? L * VV : VV, dv, (bf ? 1 : N) * VV};
  return s;
}

void MultiheadAttention::Impl::Finish(const ForwardPlan& plan, const TensorView& query,
                                      const ForwardOptions& o, const HeadSources& sources,
                                      ForwardResult* result, ThreadPool* pool) {
  const AttentionPlan& a = plan.attention;
  const size_t L = a.L, N = a.N, H = a.H, keys = a.Keys();
  weights.out_proj.Apply(sources.out.base, vv, L * N, result->output.data.data(), embed_dim, pool);
  result->output.shape = query.shape;
  const int64_t N64 = int64_t(N), H64 = int64_t(H), L64 = int64_t(L), keys64 = int64_t(keys);
  if (!o.need_weights) {
    result->weights = Tensor();
  } else if (o.average_attn_weights) {
    std::fill(result->weights.data.begin(), result->weights.data.end(), 0.0f);
    for (size_t n = 0; n < N; ++n) {
      float* dst = result->weights.data.data() + n * L * keys;
      for (size_t h = 0; h < H; ++h) {
        const float* src = sources.weights + (n * H + h) * L * keys;
        for (size_t i = 0; i < L * keys; ++i) dst[i] += src[i];
      }
      for (size_t i = 0; i < L * keys; ++i) dst[i] /= static_cast<float>(H);
    }
    result->weights.shape = plan.batched ? Shape{N64, L64, keys64} : Shape{L64, keys64};
  } else {
    result->weights.shape = plan.batched ? Shape{N64, H64, L64, keys64} : Shape{H64, L64, keys64};
  }
}

}  // namespace mha
