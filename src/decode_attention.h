// Policy around the decode kernel (src/kernels/decode_attention-inl.h): when
// a call is decode-shaped, which heads share their keys, how the keys split
// over the pool (flash-decoding), and when a call is too small to share.
#ifndef MHA_SRC_DECODE_ATTENTION_H_
#define MHA_SRC_DECODE_ATTENTION_H_

#include <vector>

#include "src/aligned_buffer.h"
#include "src/kernels/kernels.h"
#include "src/thread_pool.h"

namespace mha {

// Whether heads of `queries` query rows go to the decode kernel: few rows,
// no weights, no extra (bias_k / zero-attention) keys. Heads with float16
// keys (k_half) must.
bool DecodeShaped(size_t queries, bool need_weights, size_t num_extra);

// Runs decode-shaped heads (DecodeShaped held): consecutive heads with the
// same keys and values form one group of rows, each group's keys split into
// ranges across the pool, and the ranges' partial softmax states merge.
void RunDecodeHeads(const std::vector<kernels::AttentionHead>& heads, ThreadPool* pool,
                    AlignedBuffer* scratch);

}  // namespace mha

#endif  // MHA_SRC_DECODE_ATTENTION_H_
