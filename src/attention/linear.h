// Projections y = x W^T + b (PyTorch nn.Linear) as tiled GEMMs over the pool.
#ifndef MHA_SRC_ATTENTION_LINEAR_H_
#define MHA_SRC_ATTENTION_LINEAR_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "src/attention/aligned_buffer.h"
#include "src/kernels/weight_panel.h"
#include "src/thread_pool.h"

namespace mha {

// A weight (out x in) and bias, held only packed for the GEMM micro-kernel
// (kernels/weight_panel.h) in the type they are kept in. Memory is taken on
// the first write (Reserve, SetRows, SetBias) or use; the weights
// are zero until written. Packed for the dispatched target's panel width,
// and moved to another width if a later call finds another target (tests
// switch targets).
class PackedLinear {
 public:
  // Forgets the weights: out x in of `type`, nothing allocated.
  void Reset(kernels::WeightType type, size_t out, size_t in);
  size_t out() const { return out_; }
  size_t in() const { return in_; }
  kernels::WeightType type() const { return layout_.type; }
  // Bytes held: the packed weights, biases and scales.
  size_t bytes() const { return bytes_; }

  // Allocates the (zero) weights now. Throws std::bad_alloc; after it, the
  // writes below do not allocate.
  void Reserve();
  // Whether they are allocated for the current target (Reserve would not allocate).
  bool reserved() const;
  // Rows [row0, row0 + rows) of W (row r at w + r * in) and of the bias
  // (null: zeros), converted to the type (kernels::PackRows).
  void SetRows(size_t row0, const float* w, size_t rows);
  void SetBias(size_t row0, const float* bias, size_t count);

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
  // The packed weights at the current target's width (allocated, or moved
  // from another width, here).
  const uint8_t* Packed();
  void AddTasks(const Block& block);
  void RunTasks(const float* x, size_t ldx, float* y, size_t ldy, ThreadPool* pool);

  size_t out_ = 0;
  size_t in_ = 0;
  kernels::PanelLayout layout_;  // width 0: nothing allocated
  size_t bytes_ = 0;
  AlignedBuffer packed_;
  AlignedBuffer wide_;        // panels widened for the register tiles, per thread
  std::vector<Block> tasks_;  // reused: no allocation per call in steady state
};

}  // namespace mha

#endif  // MHA_SRC_ATTENTION_LINEAR_H_
