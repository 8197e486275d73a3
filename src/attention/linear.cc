#include "src/attention/linear.h"
#include "src/attention/shared_work.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "src/kernels/kernels.h"

namespace mha {
namespace {

// Rows per task: enough to amortise a packed panel, few enough that two
// threads get work on short sequences.
constexpr size_t kRowBlock = 64;
// Panels per task: keeps a task's slice of packed B in L2.
constexpr size_t kPanelsPerBlock = 8;

}  // namespace

void PackedLinear::Reset(kernels::WeightType type, size_t out, size_t in) {
  out_ = out;
  in_ = in;
  layout_ = {type, 0, in};
  bytes_ = 0;
  packed_ = AlignedBuffer();
}

size_t PackedLinear::ColumnAlignment() const { return kernels::GemmPanelWidth(); }

void PackedLinear::Reserve() { Packed(); }

bool PackedLinear::reserved() const {
  return layout_.width == kernels::GemmLayout(layout_.type, in_).width;
}

const uint8_t* PackedLinear::Packed() {
  const kernels::PanelLayout layout = kernels::GemmLayout(layout_.type, in_);
  if (layout.width != layout_.width) {
    const size_t bytes = layout.Bytes(out_);
    AlignedBuffer packed;
    uint8_t* dst = reinterpret_cast<uint8_t*>(packed.Get((bytes + 3) / 4));
    std::memset(dst, 0, bytes);
    if (layout_.width != 0) {
      kernels::CopyColumns(layout_, reinterpret_cast<uint8_t*>(packed_.Get(0)), 0, layout, dst, 0,
                           out_);
    }
    packed_ = std::move(packed);
    layout_ = layout;
    bytes_ = bytes;
  }
  return reinterpret_cast<const uint8_t*>(packed_.Get(0));
}

void PackedLinear::SetRows(size_t row0, const float* w, size_t rows) {
  uint8_t* packed = const_cast<uint8_t*>(Packed());
  kernels::PackRows(layout_, w, in_, row0, rows, packed);
}

void PackedLinear::SetBias(size_t row0, const float* bias, size_t count) {
  uint8_t* packed = const_cast<uint8_t*>(Packed());
  kernels::PackBias(layout_, bias, row0, count, packed);
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
  const uint8_t* packed = Packed();
  double work = 0.0;
  for (const Block& b : tasks_) {
    work += static_cast<double>(b.row_end - b.row_begin) * (b.col_end - b.col_begin) * in_;
  }
  pool = SharedPool(pool, work);
  // Tasks of more than two rows widen each panel of 16-bit or int8 weights
  // once for their register tiles, and int8's GEMV quantizes its rows: into
  // this call's slice per thread.
  size_t wide_size = 0;
  for (const Block& b : tasks_) {
    wide_size = std::max(wide_size, kernels::GemmWidenSize(layout_, b.row_end - b.row_begin));
  }
  float* wide = wide_size != 0 ? wide_.Get(wide_size * (pool ? pool->num_threads() : 1)) : nullptr;
  auto task = [&](size_t begin, size_t end, size_t thread) {
    for (size_t t = begin; t < end; ++t) {
      const Block& k = tasks_[t];
      kernels::GemmTile(x, ldx, packed, layout_, out_, y, ldy, k.row_begin, k.row_end,
                        k.col_begin, k.col_end,
                        wide ? wide + thread * wide_size : nullptr);
    }
  };
  if (pool != nullptr) {
    pool->ParallelFor(tasks_.size(), task);
  } else {
    task(0, tasks_.size(), 0);
  }
}

}  // namespace mha
