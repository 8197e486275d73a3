// Rotary positions (RoPE) for MultiheadAttention: the angle tables, computed
// in double precision, and their application to projected rows by the
// rotary kernel (src/kernels/rotary-inl.h).
#ifndef MHA_SRC_ATTENTION_ROTARY_H_
#define MHA_SRC_ATTENTION_ROTARY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mha {

// Which features turn and how fast: the first `dim` (even) of each head, pair
// i by position * inv_freq[i] (dim / 2 entries, src/attention/rope_scaling.h),
// cos and sin times attention_factor; pairs (2i, 2i+1) when interleaved, else
// (i, i + dim/2). (RotaryConfig, with dim resolved.)
struct Rotation {
  size_t dim;
  const double* inv_freq;
  double attention_factor;
  bool interleaved;
};

// Rotates the heads of projected rows in place. Rows are (seq, batch) in
// memory order: row r is sequence index s = r % seq_len and batch entry
// n = r / seq_len when batch_first, else s = r / batch and n = r % batch. It
// sits at position positions[n * seq_len + s] when `positions` is given, else
// first_position + s. Each row holds num_heads heads of head_dim floats (row
// stride ld). `table` is scratch.
void RotateRows(const Rotation& rotary, float* x, size_t ld, size_t seq_len, size_t batch,
                bool batch_first, size_t num_heads, size_t head_dim, size_t first_position,
                const int32_t* positions, std::vector<float>* table);

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_ROTARY_H_
