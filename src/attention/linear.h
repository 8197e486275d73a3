// Projections y = x W^T + b (PyTorch nn.Linear) as tiled GEMMs over the pool.
#ifndef MHA_SRC_ATTENTION_LINEAR_H_
#define MHA_SRC_ATTENTION_LINEAR_H_

#include <cstddef>
#include <vector>

#include "src/attention/aligned_buffer.h"
#include "src/thread_pool.h"

namespace mha {

// A weight (out x in, row-major) and bias, packed for the GEMM micro-kernel
// on first use and again whenever the dispatched target's panel width
// differs (tests switch targets); Invalidate() after the weights change.
class PackedLinear {
 public:
  // `weight` and `bias` (may be null) must outlive this object.
  void Reset(const float* weight, const float* bias, size_t out, size_t in);
  void Invalidate() { panel_width_ = 0; }
  size_t out() const { return out_; }
  size_t in() const { return in_; }

  // y (rows x out, row stride ldy) = x (rows x in, row stride ldx) W^T + b.
  void Apply(const float* x, size_t ldx, size_t rows, float* y, size_t ldy, ThreadPool* pool);

  // Rows [row_begin, row_end) and columns [col_begin, col_end) of y.
  struct Block {
    size_t row_begin, row_end, col_begin, col_end;
  };
  // The same on these blocks of y only, in one pass over the pool. col_begin
  // is 0 or a multiple of ColumnAlignment().
  void Apply(const float* x, size_t ldx, const std::vector<Block>& blocks, float* y, size_t ldy,
             ThreadPool* pool);
  size_t ColumnAlignment() const;

 private:
  const float* Packed();
  void AddTasks(const Block& block);
  void RunTasks(const float* x, size_t ldx, float* y, size_t ldy, ThreadPool* pool);

  const float* weight_ = nullptr;
  const float* bias_ = nullptr;
  size_t out_ = 0;
  size_t in_ = 0;
  size_t panel_width_ = 0;  // 0: not packed
  AlignedBuffer packed_;
  std::vector<Block> tasks_;  // reused: no allocation per call in steady state
};

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_LINEAR_H_
