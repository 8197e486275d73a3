// One attention call after its checks, as MultiheadAttention::Forward and
// ScaledDotProductAttention both run it: the plan, decided once by the
// call's checks, and the stages they share. The module adds its own stages
// around them (projections, rotary positions, extra keys, output
// projection, averaged weights; multihead_attention_impl.h):
//   AppendKeys -> FillHeads -> RunAttentionHeads -> ... -> CommitKeys
#ifndef MHA_SRC_CORE_ATTENTION_CALL_H_
#define MHA_SRC_CORE_ATTENTION_CALL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/attention/attention.h"
#include "src/core/kv_cache_internal.h"
#include "src/core/option_rules.h"
#include "src/kernels/kernels.h"
#include "src/kv_cache.h"
#include "src/scaled_dot_product_attention.h"
#include "src/status.h"

namespace mha {

// The score rule's options, the same for every head of a call
// (kernels::ScoreRule; docs/design.md, "The attention of today's models").
struct ScoreOptions {
  float scale = 1.0f;
  float softcap = 0.0f;  // 0: off
  WindowConfig window;
};

// The options' checks, by a module's config's rules or the functional
// form's (option_rules.h).
Status CheckScoreOptions(const ScoreOptions& options, const ScoreRules& rules);

struct AttentionPlan {
  size_t N = 1, H = 1, Hkv = 1;  // batch entries, query heads, key/value heads
  size_t L = 0, S = 0, P = 0;    // queries, new keys, keys cached before the call
  size_t qk_dim = 0, v_dim = 0;
  size_t num_extra = 0;  // keys after the T masked ones (bias_k, zero attention)
  bool causal = false;
  ScoreOptions score;
  AttentionKernel kernel = AttentionKernel::kFlash;  // decided once, by the checks

  size_t T() const { return P + S; }               // keys the masks cover
  size_t Keys() const { return T() + num_extra; }  // keys attended
};

// A call's dims as its checks found them (all >= 0).
struct CallDims {
  int64_t N, H, Hkv, L, S, P, qk_dim, v_dim;
};

// The plan of a call of these dims; the kernel that runs it is decided here,
// once (ChooseAttentionKernel).
AttentionPlan MakePlan(const CallDims& dims, size_t num_extra, bool need_weights, bool causal,
                       const ScoreOptions& score);

// Head (n, h) of a tensor starts at base + n * batch + h * head; its rows
// are `row` floats apart.
template <class Float>
struct HeadLayout {
  Float* base = nullptr;
  size_t batch = 0, head = 0, row = 0;
  Float* At(size_t n, size_t h) const { return base + n * batch + h * head; }
};

// What attention reads and writes, head by head.
struct HeadSources {
  HeadLayout<const float> q;
  HeadLayout<float> out;
  KVRows kv;                          // head (n, g): the cache's rows or the call's
  HeadLayout<const float> mask;       // additive, (L x T) per head; base null: none
  const float* key_bias = nullptr;    // additive, T per batch entry, or null
  const size_t* live = nullptr;       // with key_bias, per entry its LiveKeys (2 (T + 1))
  const float* extra_k = nullptr;     // query head h: num_extra rows at h * num_extra * qk_dim
  const float* extra_v = nullptr;
  const size_t* masked_keys = nullptr;  // per batch entry (key padding trimmed), else T
  const float* sinks = nullptr;         // one logit per query head, or null
  const float* alibi_slopes = nullptr;  // one per query head, or null
  bool alibi_symmetric = false;
  float* weights = nullptr;  // (n, h): L rows of Keys() at (n * H + h) * L * Keys(), or null
};

// Stage: stores the call's S new keys and values in the cache, uncounted
// until CommitKeys, and returns where attention reads keys: the cache's
// rows (float16 ones as stored), or without a cache the call's own.
KVRows AppendKeys(KVCache* cache, const KVRows& new_rows, size_t S);

// Stage: one kernels::AttentionHead per (batch entry, query head); query
// head h reads key/value head h / (H / Hkv).
void FillHeads(const AttentionPlan& plan, const HeadSources& sources,
               std::vector<kernels::AttentionHead>* heads);

// Stage, the last one: the appended keys count from now on. Nothing may
// fail after it, so that an error leaves the cache as it was.
void CommitKeys(KVCache* cache, size_t T);

}  // namespace mha

#endif  // MHA_SRC_CORE_ATTENTION_CALL_H_
