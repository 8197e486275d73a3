#include "src/attention/linear.h"

#include <algorithm>

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

size_t PackedLinear::ColumnAlignment() const { return kernels::GemmPanelWidth(); }

const float* PackedLinear::Packed() {
  const size_t width = kernels::GemmPanelWidth();
  if (panel_width_ != width) {
    float* packed = packed_.Get(kernels::PackedBSize(out_, in_));
    kernels::PackB(weight_, in_, bias_, out_, in_, packed);
    panel_width_ = width;
  }
  return packed_.Get(0);
}

void PackedLinear::Apply(const float* x, size_t ldx, size_t rows, float* y, size_t ldy,
                         ThreadPool* pool) {
  tasks_.clear();
  AddTasks({0, rows, 0, out_});
  RunTasks(x, ldx, y, ldy, pool);
}

void PackedLinear::Apply(const float* x, size_t ldx, const std::vector<Block>& blocks, float* y,
                         size_t ldy, ThreadPool* pool) {
  tasks_.clear();
  for (const Block& b : blocks) AddTasks(b);
  RunTasks(x, ldx, y, ldy, pool);
}

void PackedLinear::AddTasks(const Block& b) {
  const size_t col_step = kernels::GemmPanelWidth() * kPanelsPerBlock;
  const size_t col_end = std::min(b.col_end, out_);
  for (size_t r0 = b.row_begin; r0 < b.row_end; r0 += kRowBlock) {
    for (size_t c0 = b.col_begin; c0 < col_end; c0 += col_step) {
      tasks_.push_back(
          {r0, std::min(r0 + kRowBlock, b.row_end), c0, std::min(c0 + col_step, col_end)});
    }
  }
}

void PackedLinear::RunTasks(const float* x, size_t ldx, float* y, size_t ldy, ThreadPool* pool) {
  const float* packed = Packed();
  double work = 0.0;
  for (const Block& b : tasks_) {
    work += static_cast<double>(b.row_end - b.row_begin) * (b.col_end - b.col_begin) * in_;
  }
  pool = SharedPool(pool, work);
  auto task = [&](size_t begin, size_t end, size_t) {
    for (size_t t = begin; t < end; ++t) {
      const Block& k = tasks_[t];
      kernels::GemmTile(x, ldx, packed, out_, in_, y, ldy, k.row_begin, k.row_end, k.col_begin,
                        k.col_end);
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(tasks_.size(), task);
  } else {
    task(0, tasks_.size(), 0);
  }
}

}  // namespace mha
