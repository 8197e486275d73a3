// GEMM micro-kernel: C = A * B^T + bias with B packed into panels.
//
// A panel (weight_panel.h) holds two vectors of columns of B, k-major,
// followed by one row of bias, so the register tile (register_tile-inl.h)
// streams through contiguous memory and needs no bounds checks: padding
// columns are zero.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_GEMM_INL_H_
#undef MHA_SRC_KERNELS_GEMM_INL_H_
#else
#define MHA_SRC_KERNELS_GEMM_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/highway.h"
#include "src/kernels/gemv-inl.h"
#include "src/kernels/kernels.h"
#include "src/kernels/register_tile-inl.h"
#include "src/kernels/weight_panel.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

inline size_t GemmPanelWidth() {
  const hn::ScalableTag<float> d;
  return 2 * hn::Lanes(d);
}

// f32_gemm_<kRows>x<2 kPanels>v: up to kRows rows of A against kPanels
// adjacent packed panels, the second `next` floats past the first (weights
// and bias alike: `bias_next`), `cols` columns of C in all.
// HWY_INLINE: GCC stopped inlining it into GemmTileRows once RegisterTile
// took a step lambda, and the AVX2 GEMM lost speed.
// The tile stores whole vectors only, those of a panel past C's last column
// (cols < kPanels * width) to `edge`, copied to C once the tile is done: a
// call (the memcpy of StoreRow's partial rows) where accumulators are live
// makes SpiderMonkey keep them in stack slots, which its register allocator
// then writes at every multiply-add of the k loop, even when no call is made.
template <size_t kRows, size_t kPanels = 1>
HWY_INLINE void GemmPanel(const float* a, size_t lda, size_t rows, const float* panel,
                          size_t next, const float* bias, size_t bias_next, size_t k, float* c,
                          size_t ldc, size_t cols) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t width = 2 * lanes, row_width = kPanels * width;
  const float* a_rows[kRows];
  TileRowPointers<kRows>(a, lda, rows, a_rows);
  HWY_ALIGN float edge[kRows * kPanels * 2 * hn::MaxLanes(d)];
  const bool whole = cols == row_width;
  RegisterTile<kRows, kPanels>(
      d, a_rows, 1, panel, width, k,
      [&](size_t pair, size_t half) {
        return hn::LoadU(d, bias + pair % kPanels * bias_next + half * lanes);
      },
      [&](size_t pair, V c0, V c1) {
        const size_t r = pair / kPanels, col = pair % kPanels * width;
        float* out = (whole ? c + r * ldc : edge + r * row_width) + col;
        if (r < rows) {
          hn::StoreU(c0, d, out);
          hn::StoreU(c1, d, out + lanes);
        }
      },
      next);
  if (!whole) {
    for (size_t r = 0; r < rows; ++r) {
      std::memcpy(c + r * ldc, edge + r * row_width, cols * sizeof(float));
    }
  }
}

// Panel `index` of packed B (weight_panel.h) with weights of type W.
template <class W>
PanelView<W> PanelAt(const uint8_t* packed, const kernels::PanelLayout& layout, size_t index) {
  const uint8_t* panel = packed + index * layout.PanelBytes();
  const float* scale = std::is_same_v<W, int8_t>
                           ? reinterpret_cast<const float*>(panel + layout.ScaleOffset())
                           : nullptr;
  return {reinterpret_cast<const W*>(panel), reinterpret_cast<const float*>(panel + layout.BiasOffset()),
          scale};
}

// The panel's weights as float32 (k rows of the panel's width), in `wide`
// unless they are float32: 16-bit ones converted as the GEMV kernels convert
// them, int8 ones q * scale (once per panel for many rows: plain code).
template <class W>
const float* WidenPanel(const PanelView<W>& p, size_t k, float* HWY_RESTRICT wide) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d), width = 2 * lanes;
  if constexpr (std::is_same_v<W, float>) {
    (void)k;
    (void)wide;
    (void)width;
    return p.w;
  } else if constexpr (std::is_same_v<W, int8_t>) {
    for (size_t kk = 0; kk < k; ++kk) {
      for (size_t col = 0; col < width; ++col) {
        wide[kk * width + col] = p.w[kernels::Int8Offset(width, kk, col)] * p.scale[col];
      }
    }
    return wide;
  } else {
    const auto upper = UpperHalfMask(d);
    for (size_t kk = 0; kk < k; ++kk) {
      hn::Vec<decltype(d)> lo, hi;
      PanelRow(d, p, kk, upper, &lo, &hi);
      hn::StoreU(lo, d, wide + kk * width);
      hn::StoreU(hi, d, wide + kk * width + lanes);
    }
    return wide;
  }
}

// One or two rows of C from one panel: the GEMV kernels (int8: on the rows
// quantized once for every panel, `quantized`).
template <class W>
HWY_INLINE void GemvRows(const float* a, size_t lda, size_t rows, const PanelView<W>& view,
                         size_t k, float* c, size_t ldc, size_t cols,
                         const QuantizedRow* quantized) {
  if constexpr (std::is_same_v<W, int8_t>) {
    (void)a;
    (void)lda;
    if (rows == 1) return GemvInt8<1>(quantized, view, k, c, ldc, cols);
    return GemvInt8<2>(quantized, view, k, c, ldc, cols);
  } else {
    (void)quantized;
    if (rows == 1) return GemvPanel1(a, view, k, c, cols);
    return GemvPanel2(a, lda, view, k, c, ldc, cols);
  }
}

// Panels per register tile: the 2-row tile runs over two adjacent panels
// (2x4v), the others over one.
constexpr size_t TilePanels(size_t tile_rows) { return tile_rows == 2 ? 2 : 1; }

// kernels::PlanGemm under the tile of tile_rows rows: the one place that
// decides which rows run which kernel and the scratch that follows.
inline kernels::GemmPlan PlanGemm(const kernels::PanelLayout& layout, size_t rows,
                                  size_t tile_rows) {
  kernels::GemmPlan plan;
  plan.layout = layout;
  plan.rows = rows;
  plan.tile_rows = tile_rows;
  // A block of one or two rows (a decoding step's) runs the GEMV under
  // every tile, 2x4v's too.
  const size_t tail = rows <= 2 ? rows : rows % tile_rows;
  plan.gemv_rows = tail <= 2 ? tail : 0;
  const bool widen = layout.type != kernels::WeightType::kFloat32 && plan.tiled_rows() != 0;
  plan.quantized_offset = widen ? TilePanels(tile_rows) * layout.k * layout.width : 0;
  plan.quantized_size = layout.type == kernels::WeightType::kInt8 ? QuantizedRowSize(layout.k) : 0;
  plan.scratch = plan.quantized_offset + plan.gemv_rows * plan.quantized_size;
  return plan;
}

// The block of `plan` at row_begin x columns [col_begin, col_end) of C from
// packed B with weights of type W, register tiles of kRows (plan.tile_rows)
// rows over kPanels adjacent panels (a last panel without its neighbour:
// over one). Each panel of 16-bit or int8 weights is widened into `scratch`
// once for the tiles of every row (the GEMV rows read it as stored); int8's
// GEMV rows are quantized once for every panel.
template <size_t kRows, size_t kPanels, class W>
inline void GemmTileRows(const kernels::GemmPlan& plan, const float* a, size_t lda,
                         const uint8_t* packed, size_t n, float* c, size_t ldc, size_t row_begin,
                         size_t col_begin, size_t col_end, float* scratch) {
  const kernels::PanelLayout& layout = plan.layout;
  const size_t width = layout.width, k = layout.k;
  const size_t tiled_end = row_begin + plan.tiled_rows();
  QuantizedRow quantized[2];
  if constexpr (std::is_same_v<W, int8_t>) {
    for (size_t r = 0; r < plan.gemv_rows; ++r) {
      quantized[r] = QuantizeRow(a + (tiled_end + r) * lda, k,
                                 scratch + plan.quantized_offset + r * plan.quantized_size);
    }
  }
  constexpr size_t kShortRows = kRows < 4 ? kRows : 4;
  const size_t limit = col_end < n ? col_end : n;
  for (size_t col0 = col_begin; col0 < col_end; col0 += kPanels * width) {
    const size_t cols = limit - col0 < kPanels * width ? limit - col0 : kPanels * width;
    // The panel at col0 and, when `pair`, the next one.
    const bool pair = kPanels == 2 && cols > width;
    const PanelView<W> view = PanelAt<W>(packed, layout, col0 / width);
    const PanelView<W> view1 = pair ? PanelAt<W>(packed, layout, col0 / width + 1) : view;
    const float* panel = nullptr;
    size_t next = 0;
    if (tiled_end != row_begin) {
      panel = WidenPanel(view, k, scratch);
      // The next panel widens after this one; float32 panels are read in place (no scratch, which
      // may then be null).
      if (pair) {
        float* const wide = std::is_same_v<W, float> ? scratch : scratch + k * width;
        next = WidenPanel(view1, k, wide) - panel;
      }
    }
    const size_t bias_next = view1.bias - view.bias;
    for (size_t row = row_begin; row < tiled_end; row += kRows) {
      const size_t rows = tiled_end - row < kRows ? tiled_end - row : kRows;
      const float* a_row = a + row * lda;
      float* c_row = c + row * ldc + col0;
      if (pair) {
        GemmPanel<kRows, kPanels>(a_row, lda, rows, panel, next, view.bias, bias_next, k, c_row,
                                  ldc, cols);
      } else if (rows <= kShortRows) {
        GemmPanel<kShortRows>(a_row, lda, rows, panel, 0, view.bias, 0, k, c_row, ldc, cols);
      } else {
        GemmPanel<kRows>(a_row, lda, rows, panel, 0, view.bias, 0, k, c_row, ldc, cols);
      }
    }
    if (plan.gemv_rows != 0) {
      const float* a_gemv = a + tiled_end * lda;
      float* c_gemv = c + tiled_end * ldc + col0;
      GemvRows(a_gemv, lda, plan.gemv_rows, view, k, c_gemv, ldc, pair ? width : cols,
               quantized);
      if (pair) {
        GemvRows(a_gemv, lda, plan.gemv_rows, view1, k, c_gemv + width, ldc, cols - width,
                 quantized);
      }
    }
  }
}

// The micro-kernel for weights of `type` and tiles of `tile_rows` rows (one
// of kernels::kGemmTileRows, from the plan): the one place that picks it. GemmTile calls it
// through the pointer, so no compiler puts the sixteen kernels in one function:
// binaryen's inliner did (emcc's wasm-opt -O3 inlines a function with one
// caller whatever its size), and V8 compiled that 58 KB function with its
// mid-tier register allocator, which made its tiles slower
// (scripts/wasm_function_sizes.mjs checks the sizes).
template <class W>
kernels::GemmTileFn GemmKernelOfRows(size_t tile_rows) {
  switch (tile_rows) {
    case 2: return &GemmTileRows<2, TilePanels(2), W>;
    case 4: return &GemmTileRows<4, TilePanels(4), W>;
    case 6: return &GemmTileRows<6, TilePanels(6), W>;
    default: return &GemmTileRows<8, TilePanels(8), W>;
  }
}

inline kernels::GemmTileFn GemmKernel(kernels::WeightType type, size_t tile_rows) {
  using kernels::WeightType;
  switch (type) {
    case WeightType::kFloat16: return GemmKernelOfRows<Half>(tile_rows);
    case WeightType::kBFloat16: return GemmKernelOfRows<BFloat16>(tile_rows);
    case WeightType::kInt8: return GemmKernelOfRows<int8_t>(tile_rows);
    default: return GemmKernelOfRows<float>(tile_rows);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_GEMM_INL_H_
