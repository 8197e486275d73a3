// Independent scalar (double) references for the fuzz targets: the PyTorch
// math written out loop by loop, sharing no code with src/.
#ifndef MHA_TESTS_FUZZ_REFERENCE_MHA_H_
#define MHA_TESTS_FUZZ_REFERENCE_MHA_H_

#include <map>
#include <string>
#include <vector>

#include "src/multihead_attention.h"

namespace mha_fuzz {

// nn.MultiheadAttention.forward (non-fused path, docs/design.md semantics) for a
// resolved config (kdim, vdim, head dims, num_kv_heads, rotary.dim filled in)
// and state_dict `params` in the Parameters() form. Inputs must already have
// valid shapes. Keys sit at positions 0.., query row i at first_query + i
// (rotary angles; causal: key j <= first_query + i), as after a cache of
// first_query keys; options.cache is ignored (key holds every key).
// half_keys: projected keys and values are rounded to IEEE half (nearest
// even), as a float16 cache stores them. Rotary positions: options.positions
// for the queries when given, and key_positions (N * S, n * S + j) for the
// keys when given.
void ReferenceMha(const mha::MultiheadAttentionConfig& c,
                  const std::map<std::string, std::vector<float>>& params,
                  const mha::TensorView& query, const mha::TensorView& key,
                  const mha::TensorView& value, const mha::ForwardOptions& options,
                  mha::ForwardResult* result, size_t first_query = 0, bool half_keys = false,
                  const int32_t* key_positions = nullptr);

// F.scaled_dot_product_attention (PyTorch 2.x) on valid, rank-3 or rank-4 inputs.
void ReferenceSdpa(const mha::TensorView& query, const mha::TensorView& key,
                   const mha::TensorView& value, const mha::SdpaOptions& options,
                   mha::Tensor* output);

}  // namespace mha_fuzz

#endif  // MHA_TESTS_FUZZ_REFERENCE_MHA_H_
