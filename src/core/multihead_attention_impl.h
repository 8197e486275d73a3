// The private state of MultiheadAttention, shared by its source files, and
// the stages of its forward pass (multihead_attention_run.cc).
#ifndef MHA_SRC_CORE_MULTIHEAD_ATTENTION_IMPL_H_
#define MHA_SRC_CORE_MULTIHEAD_ATTENTION_IMPL_H_

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "src/attention/aligned_buffer.h"
#include "src/attention/attention.h"
#include "src/attention/linear.h"
#include "src/attention/rope_scaling.h"
#include "src/attention/rotary.h"
#include "src/core/attention_call.h"
#include "src/kernels/kernels.h"
#include "src/multihead_attention.h"

namespace mha {

// A forward call as its checks found it (CheckForward builds it): the
// attention plan, with its kernel decided there once, and the layout.
struct ForwardPlan {
  AttentionPlan attention;
  bool batched = false;
  bool batch_first = false;  // batched and config.batch_first
};

// The projected queries, keys and values: rows in the inputs' memory order
// ((seq, N) or (N, seq)), ld floats apart.
struct Projections {
  float *q = nullptr, *k = nullptr, *v = nullptr;
  size_t q_ld = 0, k_ld = 0, v_ld = 0;
};

// The type weights are kept in for `dtype`; `stored` for kAuto.
kernels::WeightType StoredWeightType(WeightsDtype dtype, kernels::WeightType stored);

// The projection weights and biases, held only packed, in their type
// (linear.h). With kdim == vdim == embed_dim the in-projection lives in
// qkv_proj alone (q_proj, k_proj, v_proj hold nothing: cross-attention runs
// on its column ranges), else in those three. One value, so that a load can
// fill new ones and swap them in only once all is done.
struct ProjectionWeights {
  PackedLinear q_proj, k_proj, v_proj, qkv_proj, out_proj;

  // Allocates the weights a load writes (qkv_proj or q, k and v_proj, and
  // out_proj; throws std::bad_alloc), so that storing them does not allocate.
  void Reserve();
  // Whether they are of these types and Reserve would not allocate.
  bool Reserved(kernels::WeightType in_type, kernels::WeightType out_type) const;
};

// Parameters, their packed forms and the reusable per-forward buffers.
struct MultiheadAttention::Impl {
  uint64_t id = 0;  // tells this module's caches from others'
  int64_t qk = 0;   // num_heads * qk_head_dim: queries
  int64_t vv = 0;   // num_heads * v_head_dim: attention outputs
  int64_t kk = 0;   // num_kv_heads * qk_head_dim: keys
  int64_t kv = 0;   // num_kv_heads * v_head_dim: values
  bool in_proj_packed = false;  // one in_proj_weight (kdim == vdim == embed_dim, default heads)

  std::vector<float> bias_k, bias_v;
  std::vector<float> sinks;  // num_heads, or empty
  // q/k norms' weights (weight_offset added) and LayerNorm's biases, one per
  // feature of a projected row (qk and kk floats), or empty.
  std::vector<float> q_norm, k_norm, q_norm_bias, k_norm_bias;
  RotaryFrequencies rotary;  // the table of config.rotary, when enabled
  std::set<std::string> loaded;
  bool complete = false;  // every parameter loaded (`loaded` only grows): Forward checks once

  ProjectionWeights weights;

  // New weights (nothing allocated) of these types, for this module's shapes.
  ProjectionWeights NewWeights(kernels::WeightType in_type, kernels::WeightType out_type) const;
  // Copies one parameter of `size` floats (checked by CheckParameter) into
  // its place, the projections' into `w` (reserved: this does not allocate).
  void StoreParameter(const std::string& name, const float* data, int64_t size,
                      ProjectionWeights* w);
  // Bytes the weights take in their types.
  size_t WeightBytes() const;

  std::mutex mutex;  // one Forward at a time: buffers below are shared
  AlignedBuffer qkv, attn, extras, head_weights, scratch;
  std::vector<float> kpm_storage, mask_storage, rotary_table;
  std::vector<kernels::AttentionHead> heads;
  std::vector<size_t> live_keys;                // per batch entry
  std::vector<size_t> live_storage;             // key padding's LiveKeys (HeadSources::live)
  bool trimmed = false;                         // live_keys stops before some keys
  std::vector<PackedLinear::Block> key_blocks;  // their rows of the key projections
  int64_t embed_dim = 0, kdim = 0, vdim = 0;
  float qk_norm_offset = 0.0f;  // config.qk_norm.weight_offset

  // The forward pass on validated inputs, stage by stage (below). Throws
  // std::bad_alloc when buffers cannot grow, leaving the cache as it was.
  void Run(const MultiheadAttentionConfig& c, const ForwardPlan& plan, const TensorView& query,
           const TensorView& key, const TensorView& value, const ForwardOptions& options,
           ForwardResult* result, ThreadPool* pool);

  // Key padding as an additive mask (null without one), and its ends per
  // batch entry (live_storage). Without weights or a cache, keys it removes
  // at the end of a batch entry are never attended: live_keys stops each
  // entry before them and `trimmed` says so.
  const float* TrimKeyPadding(const ForwardPlan& plan, const ForwardOptions& o);
  // Q, K and V (the live keys' rows only when trimmed).
  Projections Project(const ForwardPlan& plan, const TensorView& query, const TensorView& key,
                      const TensorView& value, ThreadPool* pool);
  // Project with the fused in-projection (qkv_proj).
  Projections ProjectFused(const ForwardPlan& plan, const TensorView& query,
                           const TensorView& key, const TensorView& value, ThreadPool* pool);
  // Blocks of the key rows to project (each entry's live keys, or all) and
  // columns [col_begin, col_end), in key_blocks.
  std::vector<PackedLinear::Block>& KeyRows(const ForwardPlan& plan, size_t col_begin,
                                            size_t col_end);
  // Normalizes the projected queries and new keys (q/k norms).
  void Normalize(const MultiheadAttentionConfig& c, const ForwardPlan& plan, const Projections& p);
  // How rotary turns queries and keys (with rotary enabled).
  Rotation KeyRotation(const MultiheadAttentionConfig& c) const;
  // Turns the projected queries and new keys by their positions (P + i, or
  // `positions` when not null: ForwardOptions::positions).
  void Rotate(const MultiheadAttentionConfig& c, const ForwardPlan& plan, const Projections& p,
              const int32_t* positions);
  // Appends the keys (AppendKeys) and lays out everything attention reads
  // and writes, allocating the output and weights.
  HeadSources Sources(const MultiheadAttentionConfig& c, const ForwardPlan& plan,
                      const Projections& p, const float* key_padding, const ForwardOptions& o,
                      ForwardResult* result);
  // The output projection, and the weights (averaged over heads if asked)
  // with their shape.
  void Finish(const ForwardPlan& plan, const TensorView& query, const ForwardOptions& o,
              const HeadSources& sources, ForwardResult* result, ThreadPool* pool);
};

// The padding a module's cache remembers (src/core/multihead_attention_padding.cc;
// docs/design.md, "Caches an app keeps"), with options.cache set and locked:
// the options the call runs with: `options`, or in `padded` a copy with a
// key padding mask over the pad slots and per-entry rotary positions where
// the call gives none. Throws std::bad_alloc (its buffers, kept in the
// cache, grow).
const ForwardOptions& WithCachePadding(const MultiheadAttentionConfig& c, const ForwardPlan& plan,
                                       const ForwardOptions& options, ForwardOptions* padded);
// After the call succeeded: a prefill's padding (WithCachePadding's) becomes
// the cache's. Does not allocate.
void RememberPadding(const ForwardPlan& plan, const ForwardOptions& options);

}  // namespace mha

#endif  // MHA_SRC_CORE_MULTIHEAD_ATTENTION_IMPL_H_
