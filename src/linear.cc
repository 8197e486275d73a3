#include "src/linear.h"

#include "src/kernels/kernels.h"

namespace mha {
namespace {

// Rows per task: enough to amortise a packed panel, few enough that two
// threads get work on short sequences.
constexpr size_t kRowBlock = 64;
// Panels per task: keeps a task's slice of packed B in L2.
constexpr size_t kPanelsPerBlock = 8;

}  // namespace

void PackedLinear::Reset(const float* weight, const float* bias, size_t out, size_t in) {
  weight_ = weight;
  bias_ = bias;
  out_ = out;
  in_ = in;
  panel_width_ = 0;
}

void PackedLinear::Apply(const float* x, size_t ldx, size_t rows, float* y, size_t ldy,
                         ThreadPool* pool) {
  const size_t width = kernels::GemmPanelWidth();
  if (panel_width_ != width) {
    float* packed = packed_.Get(kernels::PackedBSize(out_, in_));
    kernels::PackB(weight_, in_, bias_, out_, in_, packed);
    panel_width_ = width;
  }
  const float* packed = packed_.Get(0);
  const size_t row_blocks = (rows + kRowBlock - 1) / kRowBlock;
  const size_t col_step = width * kPanelsPerBlock;
  const size_t col_blocks = (out_ + col_step - 1) / col_step;
  auto task = [&](size_t begin, size_t end, size_t) {
    for (size_t t = begin; t < end; ++t) {
      const size_t r0 = (t / col_blocks) * kRowBlock;
      const size_t c0 = (t % col_blocks) * col_step;
      const size_t r1 = r0 + kRowBlock < rows ? r0 + kRowBlock : rows;
      const size_t c1 = c0 + col_step < out_ ? c0 + col_step : out_;
      kernels::GemmTile(x, ldx, packed, out_, in_, y, ldy, r0, r1, c0, c1);
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(row_blocks * col_blocks, task);
  } else {
    task(0, row_blocks * col_blocks, 0);
  }
}

}  // namespace mha
