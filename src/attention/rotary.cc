#include "src/attention/rotary.h"

#include <cmath>

#include "src/kernels/kernels.h"

namespace mha {

void FillRotaryTable(const Rotation& rotary, size_t rows, size_t first_position,
                     const int32_t* positions, std::vector<float>* table) {
  const size_t dim = rotary.dim, half = dim / 2;
  // Angles in double: at position 4096 a float32 angle would be off by ~3e-4.
  table->resize(rows * dim);
  for (size_t s = 0; s < rows; ++s) {
    float* row = table->data() + s * dim;
    const double position = positions != nullptr ? static_cast<double>(positions[s])
                                                 : static_cast<double>(first_position + s);
    for (size_t i = 0; i < half; ++i) {
      const double angle = position * rotary.inv_freq[i];
      row[i] = static_cast<float>(std::cos(angle) * rotary.attention_factor);
      row[half + i] = static_cast<float>(std::sin(angle) * rotary.attention_factor);
    }
  }
}

void RotateRows(const Rotation& rotary, const float* table, bool per_batch, float* x, size_t ld,
                size_t seq_len, size_t batch, bool batch_first, size_t num_heads,
                size_t head_dim) {
  const size_t dim = rotary.dim;
  for (size_t r = 0; r < seq_len * batch; ++r) {
    const size_t s = batch_first ? r % seq_len : r / batch;
    const size_t n = batch_first ? r / seq_len : r % batch;
    const float* angles = table + (per_batch ? n * seq_len + s : s) * dim;
    kernels::RotateHeads(x + r * ld, num_heads, head_dim, dim, rotary.interleaved, angles,
                         angles + dim / 2);
  }
}

}  // namespace mha
