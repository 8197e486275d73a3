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

// Fills `table` with `rows` rows: row t holds the dim/2 cosines, then the
// dim/2 sines, of position positions[t] when `positions` is given, else of
// first_position + t.
void FillRotaryTable(const Rotation& rotary, size_t rows, size_t first_position,
                     const int32_t* positions, std::vector<float>* table);

// Rotates the heads of projected rows in place by the angles of `table`
// (FillRotaryTable's). Rows are (seq, batch) in memory order: row r is
// sequence index s = r % seq_len and batch entry n = r / seq_len when
// batch_first, else s = r / batch and n = r % batch. Its angles are table row
// n * seq_len + s when per_batch (a table of positions), else row s. Each row
// holds num_heads heads of head_dim floats (row stride ld).
void RotateRows(const Rotation& rotary, const float* table, bool per_batch, float* x, size_t ld,
                size_t seq_len, size_t batch, bool batch_first, size_t num_heads,
                size_t head_dim);

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_ROTARY_H_
