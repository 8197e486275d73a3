// The decoding fuzz case: a schedule of calls on one KV cache.
#ifndef MHA_TESTS_FUZZ_DECODE_CASE_H_
#define MHA_TESTS_FUZZ_DECODE_CASE_H_

#include <string>

#include "src/thread_pool.h"
#include "tests/fuzz/fuzz_input.h"

namespace mha_fuzz {

// A module with fuzzed grouped-query heads, rotary positions, head dims and
// layout, and a float32 or float16 cache; then random prefills, steps and
// chunks (causal or not, key padding over all keys, float attn_mask,
// weights), attend-only calls, truncations and reorders (beam search). Each
// call must match the scalar reference run over every key the cache holds
// (the reference's tokens reordered as the cache); appending past max_length
// and reordering with an index out of range must fail and leave the cache as
// it was.
std::string DecodeCase(FuzzInput& in, mha::ThreadPool* pool);

}  // namespace mha_fuzz

#endif  // MHA_TESTS_FUZZ_DECODE_CASE_H_
