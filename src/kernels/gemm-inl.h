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

// f32_gemm_<kRows>x2v: up to kRows rows of A against one packed panel.
// HWY_INLINE: GCC stopped inlining it into GemmTileRows once RegisterTile
// took a step lambda, and the AVX2 GEMM lost speed.
// The tile stores whole vectors only, those of a panel past C's last column
// (cols < width) to `edge`, copied to C once the tile is done: a call (the
// memcpy of StoreRow's partial rows) where accumulators are live makes
// SpiderMonkey keep them in stack slots, which its register allocator then
// writes at every multiply-add of the k loop, even when no call is made.
template <size_t kRows>
HWY_INLINE void GemmPanel(const float* a, size_t lda, size_t rows, const float* panel,
                          const float* bias, size_t k, float* c, size_t ldc, size_t cols) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t width = 2 * lanes;
  const float* a_rows[kRows];
  TileRowPointers<kRows>(a, lda, rows, a_rows);
  HWY_ALIGN float edge[kRows * 2 * hn::MaxLanes(d)];
  const bool whole = cols == width;
  RegisterTile<kRows>(
      d, a_rows, 1, panel, width, k,
      [&](size_t, size_t half) { return hn::LoadU(d, bias + half * lanes); },
      [&](size_t r, V c0, V c1) {
        float* out = whole ? c + r * ldc : edge + r * width;
        if (r < rows) {
          hn::StoreU(c0, d, out);
          hn::StoreU(c1, d, out + lanes);
        }
      });
  if (!whole) {
    for (size_t r = 0; r < rows; ++r) std::memcpy(c + r * ldc, edge + r * width, cols * sizeof(float));
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

// kernels::PlanGemm under the tile of tile_rows rows: the one place that
// decides which rows run which kernel and the scratch that follows.
inline kernels::GemmPlan PlanGemm(const kernels::PanelLayout& layout, size_t rows,
                                  size_t tile_rows) {
  kernels::GemmPlan plan;
  plan.layout = layout;
  plan.rows = rows;
  plan.tile_rows = tile_rows;
  const size_t tail = rows % tile_rows;
  plan.gemv_rows = tail <= 2 ? tail : 0;
  const bool widen = layout.type != kernels::WeightType::kFloat32 && plan.tiled_rows() != 0;
  plan.quantized_offset = widen ? layout.k * layout.width : 0;
  plan.quantized_size = layout.type == kernels::WeightType::kInt8 ? QuantizedRowSize(layout.k) : 0;
  plan.scratch = plan.quantized_offset + plan.gemv_rows * plan.quantized_size;
  return plan;
}

// The block of `plan` at row_begin x columns [col_begin, col_end) of C from
// packed B with weights of type W, register tiles of kRows (plan.tile_rows)
// rows. Each panel of 16-bit or int8 weights is widened into `scratch` once
// for the tiles of every row (the GEMV rows read it as stored); int8's GEMV
// rows are quantized once for every panel.
template <size_t kRows, class W>
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
  for (size_t col0 = col_begin; col0 < col_end; col0 += width) {
    const PanelView<W> view = PanelAt<W>(packed, layout, col0 / width);
    const float* panel = tiled_end != row_begin ? WidenPanel(view, k, scratch) : nullptr;
    const size_t limit = col_end < n ? col_end : n;
    const size_t cols = limit - col0 < width ? limit - col0 : width;
    for (size_t row = row_begin; row < tiled_end; row += kRows) {
      const size_t rows = tiled_end - row < kRows ? tiled_end - row : kRows;
      if (rows <= 4) {
        GemmPanel<4>(a + row * lda, lda, rows, panel, view.bias, k, c + row * ldc + col0, ldc,
                     cols);
      } else {
        GemmPanel<kRows>(a + row * lda, lda, rows, panel, view.bias, k, c + row * ldc + col0, ldc,
                         cols);
      }
    }
    if (plan.gemv_rows != 0) {
      GemvRows(a + tiled_end * lda, lda, plan.gemv_rows, view, k, c + tiled_end * ldc + col0, ldc,
               cols, quantized);
    }
  }
}

// The micro-kernel for weights of `type` and tiles of `tile_rows` rows (one
// of kernels::kGemmTileRows, from the plan): the one place that picks it. GemmTile calls it
// through the pointer, so no compiler puts the twelve kernels in one function:
// binaryen's inliner did (emcc's wasm-opt -O3 inlines a function with one
// caller whatever its size), and V8 compiled that 58 KB function with its
// mid-tier register allocator, which made its tiles slower
// (scripts/wasm_function_sizes.mjs checks the sizes).
template <class W>
kernels::GemmTileFn GemmKernelOfRows(size_t tile_rows) {
  switch (tile_rows) {
    case 4: return &GemmTileRows<4, W>;
    case 6: return &GemmTileRows<6, W>;
    default: return &GemmTileRows<8, W>;
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
