// mha::ScaledDotProductAttention: the functional form, on the same kernels
// and cache as the module (multihead_attention.h includes this header).
#ifndef MHA_SRC_SCALED_DOT_PRODUCT_ATTENTION_H_
#define MHA_SRC_SCALED_DOT_PRODUCT_ATTENTION_H_

#include <cstdint>

#include "src/kv_cache.h"
#include "src/status.h"
#include "src/tensor.h"
#include "src/thread_pool.h"

namespace mha {

// A sliding window (docs/design.md, "The attention of today's models"): the query
// at position p sees keys p - left <= j <= p + right; -1: no bound on that
// side. Hugging Face's sliding_window W is {W - 1, -1} with is_causal;
// FlashAttention's window_size (ModernBERT: 64, 64) is {left, right}.
struct WindowConfig {
  int64_t left = -1;
  int64_t right = -1;
  bool enabled() const { return left >= 0 || right >= 0; }
};

// torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x conventions):
// q (B, H, L, E), k (B, H, S, E), v (B, H, S, Ev), or the same without H
// (3-D). attn_mask broadcasts to (B, H, L, S): bool true = MAY attend, float is
// added. is_causal masks j > i (top-left); it may not be combined with a mask.
// scale: 0 means 1/sqrt(E). softcap as the module's (multihead_attention.h).
// Rows with no attendable key are NaN.
// enable_gqa: key and value may have Hkv heads, dividing the query's H; query
// head h reads head h / (H / Hkv) (PyTorch 2.5).
// cache (from KVCache::Create, not a module's): key and value hold only the
// S_new new rows (B, Hkv, S_new, E) (or are both empty: nothing appended),
// appended at positions P..; queries attend to all T = P + S_new cached keys;
// the mask broadcasts to (B, H, L, T); is_causal lets query i attend keys
// j <= P + i. The cache's batch_size, num_kv_heads, head_dim and v_head_dim
// must be B, Hkv, E and Ev. On any error the cache is left as it was.
struct SdpaOptions {
  MaskView attn_mask;
  bool is_causal = false;
  float scale = 0.0f;
  float softcap = 0.0f;  // > 0: scores s become softcap * tanh(s / softcap) (Gemma 2); 0: off
  WindowConfig window;   // masks: query i at P + i, key j at j
  // A logit per query head in the softmax's denominator (gpt-oss), shape (H);
  // data null: none.
  TensorView sinks;
  // ALiBi slopes, one per query head, shape (H); data null: none.
  TensorView alibi_slopes;
  bool enable_gqa = false;
  KVCache* cache = nullptr;
};

Status ScaledDotProductAttention(const TensorView& query, const TensorView& key,
                                 const TensorView& value, const SdpaOptions& options,
                                 Tensor* output, ThreadPool* pool = nullptr);

}  // namespace mha

#endif  // MHA_SRC_SCALED_DOT_PRODUCT_ATTENTION_H_
