// Policy around the attention kernel: masks to additive form, and running
// many (batch, head) problems across the pool in query chunks.
#ifndef MHA_SRC_ATTENTION_H_
#define MHA_SRC_ATTENTION_H_

#include <vector>

#include "src/aligned_buffer.h"
#include "src/kernels/kernels.h"
#include "src/tensor.h"
#include "src/thread_pool.h"

namespace mha {

// Returns the mask as additive floats: a float mask as is (no copy); a bool
// mask converted into `storage`, -inf where the element equals
// `masked_value` (1 for nn.MultiheadAttention, 0 for SDPA) and 0 elsewhere.
const float* AdditiveMask(const MaskView& mask, uint8_t masked_value, std::vector<float>* storage);

// Runs every head, split into query chunks spread over the pool.
void RunAttentionHeads(const std::vector<kernels::AttentionHead>& heads, ThreadPool* pool,
                       AlignedBuffer* scratch);

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_H_
