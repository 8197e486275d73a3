// Policy around the decode kernel (src/kernels/decode_attention-inl.h):
// which heads share their keys, how the keys split
// over the pool (flash-decoding), and when a call is too small to share.
#ifndef MHA_SRC_ATTENTION_DECODE_ATTENTION_H_
#define MHA_SRC_ATTENTION_DECODE_ATTENTION_H_

#include <vector>

#include "src/attention/aligned_buffer.h"
#include "src/kernels/kernels.h"
#include "src/thread_pool.h"

namespace mha {

// Runs decode-shaped heads (ChooseAttentionKernel gave kDecode): consecutive heads with the
// same keys and values form one group of rows, each group's keys split into
// ranges across the pool, and the ranges' partial softmax states merge.
void RunDecodeHeads(const std::vector<kernels::AttentionHead>& heads, ThreadPool* pool,
                    AlignedBuffer* scratch);

// Test hook: with min_keys_per_range > 0, decode calls on a pool share
// whatever their work (kMinSharedWork) and split each group's keys into two
// ranges or more of at least that many keys (instead of kMinKeysPerRange),
// so that small fixtures exercise the split and merge; 0 restores the
// defaults.
void SetDecodeSplitForTesting(size_t min_keys_per_range);

// Decode calls that ran more than one key range, since the process started.
size_t DecodeSplitCalls();

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_DECODE_ATTENTION_H_
