// The private state of MultiheadAttention, shared by its two source files.
#ifndef MHA_SRC_CORE_MULTIHEAD_ATTENTION_IMPL_H_
#define MHA_SRC_CORE_MULTIHEAD_ATTENTION_IMPL_H_

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "src/attention/aligned_buffer.h"
#include "src/attention/attention.h"
#include "src/kernels/kernels.h"
#include "src/attention/linear.h"
#include "src/multihead_attention.h"

namespace mha {

// A forward call as its checks found it: its dims and the attention kernel
// that runs it, decided once here.
struct ForwardPlan {
  bool batched = false;
  int64_t L = 0, S = 0, N = 1;  // S: new keys (the key argument's rows)
  int64_t P = 0;                // keys in the cache before the call
  AttentionKernel kernel = AttentionKernel::kFlash;
};

// Parameters, their packed forms and the reusable per-forward buffers.
struct MultiheadAttention::Impl {
  uint64_t id = 0;  // tells this module's caches from others'
  int64_t qk = 0;   // num_heads * qk_head_dim: queries
  int64_t vv = 0;   // num_heads * v_head_dim: attention outputs
  int64_t kk = 0;   // num_kv_heads * qk_head_dim: keys
  int64_t kv = 0;   // num_kv_heads * v_head_dim: values
  bool in_proj_packed = false;  // one in_proj_weight (kdim == vdim == embed_dim, default heads)

  // [q_proj_weight; k_proj_weight; v_proj_weight], as in_proj_weight when packed.
  std::vector<float> in_weight;
  std::vector<float> in_bias;  // [q; k; v] biases, or empty
  std::vector<float> bias_k, bias_v;
  std::vector<float> out_weight, out_bias;
  std::set<std::string> loaded;
  bool complete = false;  // every parameter loaded (`loaded` only grows): Forward checks once

  PackedLinear q_proj, k_proj, v_proj, qkv_proj, out_proj;

  std::mutex mutex;  // one Forward at a time: buffers below are shared
  AlignedBuffer qkv, attn, extras, head_weights, scratch;
  std::vector<float> kpm_storage, mask_storage, rotary_table;
  std::vector<kernels::AttentionHead> heads;
  std::vector<size_t> live_keys;                // per batch entry
  std::vector<PackedLinear::Block> key_blocks;  // their rows of the key projections
  int64_t embed_dim = 0, kdim = 0, vdim = 0;

  // The forward pass on validated inputs (multihead_attention_forward.cc).
  // Throws std::bad_alloc when buffers cannot grow, leaving the cache as it was.
  void Run(const MultiheadAttentionConfig& c, const ForwardPlan& plan, const TensorView& query,
           const TensorView& key, const TensorView& value, const ForwardOptions& options,
           ForwardResult* result, ThreadPool* pool);
};

}  // namespace mha

#endif  // MHA_SRC_CORE_MULTIHEAD_ATTENTION_IMPL_H_
