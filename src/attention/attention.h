// Policy around the attention kernel: masks to additive form, and running
// many (batch, head) problems across the pool in query chunks.
#ifndef MHA_SRC_ATTENTION_ATTENTION_H_
#define MHA_SRC_ATTENTION_ATTENTION_H_

#include <vector>

#include "src/attention/aligned_buffer.h"
#include "src/kernels/kernels.h"
#include "src/tensor.h"
#include "src/thread_pool.h"

namespace mha {

// Returns the mask as additive floats: a float mask as is (no copy); a bool
// mask converted into `storage`, -inf where the element equals
// `masked_value` (1 for nn.MultiheadAttention, 0 for SDPA) and 0 elsewhere.
const float* AdditiveMask(const MaskView& mask, uint8_t masked_value, std::vector<float>* storage);

// The kernel that runs a call's heads, decided once per call from its
// shape by the call's checks (its plan) and obeyed by RunAttentionHeads.
enum class AttentionKernel {
  kDecode,   // few query rows, no weights, no extra keys: src/attention/decode_attention.h
  kFlash,    // kernels::Attention in query chunks, online softmax
  kWeights,  // kernels::Attention in query chunks, weights materialised
};

// kDecode for queries in [1, kernels::kMaxDecodeRows] without weights or
// extra (bias_k / zero-attention) keys, else kWeights or kFlash.
AttentionKernel ChooseAttentionKernel(size_t queries, bool need_weights, size_t num_extra);

// Runs every head with `kernel`: the decode kernel's key ranges, or query
// chunks, spread over the pool. kWeights heads have weights set, the others not.
void RunAttentionHeads(const std::vector<kernels::AttentionHead>& heads, AttentionKernel kernel,
                       ThreadPool* pool, AlignedBuffer* scratch);

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_ATTENTION_H_
