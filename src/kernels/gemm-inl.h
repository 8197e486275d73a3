// GEMM micro-kernel: C = A * B^T + bias with B packed into panels.
//
// A panel holds two vectors of columns of B, k-major, followed by one row of
// bias, so the register tile (register_tile-inl.h) streams through contiguous
// memory and needs no bounds checks: padding columns are zero.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_GEMM_INL_H_
#undef MHA_SRC_KERNELS_GEMM_INL_H_
#else
#define MHA_SRC_KERNELS_GEMM_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"
#include "src/kernels/gemv-inl.h"
#include "src/kernels/register_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

inline size_t GemmPanelWidth() {
  const hn::ScalableTag<float> d;
  return 2 * hn::Lanes(d);
}

inline size_t PackedBSize(size_t n, size_t k) {
  const size_t width = GemmPanelWidth();
  const size_t panels = (n + width - 1) / width;
  return panels * (k + 1) * width;
}

inline void PackB(const float* b, size_t ldb, const float* bias, size_t n, size_t k,
                  float* packed) {
  const size_t width = GemmPanelWidth();
  for (size_t col0 = 0; col0 < n; col0 += width) {
    const size_t cols = n - col0 < width ? n - col0 : width;
    for (size_t kk = 0; kk < k; ++kk) {
      float* dst = packed + kk * width;
      for (size_t c = 0; c < cols; ++c) dst[c] = b[(col0 + c) * ldb + kk];
      for (size_t c = cols; c < width; ++c) dst[c] = 0.0f;
    }
    float* bias_row = packed + k * width;
    for (size_t c = 0; c < width; ++c) {
      bias_row[c] = (bias != nullptr && c < cols) ? bias[col0 + c] : 0.0f;
    }
    packed += (k + 1) * width;
  }
}

// f32_gemm_<kRows>x2v: up to kRows rows of A against one packed panel.
// HWY_INLINE: GCC stopped inlining it into GemmTileRows once RegisterTile
// took a step lambda, and the AVX2 GEMM lost speed.
template <size_t kRows>
HWY_INLINE void GemmPanel(const float* a, size_t lda, size_t rows, const float* panel,
                          size_t k, float* c, size_t ldc, size_t cols) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t width = 2 * lanes;
  const float* a_rows[kRows];
  TileRowPointers<kRows>(a, lda, rows, a_rows);
  const float* bias = panel + k * width;
  RegisterTile<kRows>(
      d, a_rows, 1, panel, width, k,
      [&](size_t, size_t half) { return hn::LoadU(d, bias + half * lanes); },
      [&](size_t r, V c0, V c1) {
        if (r < rows) StoreRow(d, c0, c1, cols, c + r * ldc);
      });
}

template <size_t kRows>
inline void GemmTileRows(const float* a, size_t lda, const float* packed, size_t n, size_t k,
                         float* c, size_t ldc, size_t row_begin, size_t row_end, size_t col_begin,
                         size_t col_end) {
  const size_t width = GemmPanelWidth();
  for (size_t col0 = col_begin; col0 < col_end; col0 += width) {
    const float* panel = packed + (col0 / width) * (k + 1) * width;
    const size_t limit = col_end < n ? col_end : n;
    const size_t cols = limit - col0 < width ? limit - col0 : width;
    for (size_t row = row_begin; row < row_end; row += kRows) {
      const size_t rows = row_end - row < kRows ? row_end - row : kRows;
      // One or two rows (a decoding step's tokens, a tail): the GEMV kernels;
      // three or four (a tail of 64-row blocks under 6-row tiles): the 4-row
      // tile, which computes no rows that are thrown away.
      if (rows == 1) {
        GemvPanel1(a + row * lda, panel, k, c + row * ldc + col0, cols);
      } else if (rows == 2) {
        GemvPanel2(a + row * lda, lda, panel, k, c + row * ldc + col0, ldc, cols);
      } else if (rows <= 4) {
        GemmPanel<4>(a + row * lda, lda, rows, panel, k, c + row * ldc + col0, ldc, cols);
      } else {
        GemmPanel<kRows>(a + row * lda, lda, rows, panel, k, c + row * ldc + col0, ldc, cols);
      }
    }
  }
}

// GemmTileRows with tile_rows, one of kernels::kGemmTileRows.
inline void GemmTileWithRows(size_t tile_rows, const float* a, size_t lda, const float* packed,
                             size_t n, size_t k, float* c, size_t ldc, size_t row_begin,
                             size_t row_end, size_t col_begin, size_t col_end) {
  switch (tile_rows) {
    case 4:
      return GemmTileRows<4>(a, lda, packed, n, k, c, ldc, row_begin, row_end, col_begin, col_end);
    case 6:
      return GemmTileRows<6>(a, lda, packed, n, k, c, ldc, row_begin, row_end, col_begin, col_end);
    default:
      return GemmTileRows<8>(a, lda, packed, n, k, c, ldc, row_begin, row_end, col_begin, col_end);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_GEMM_INL_H_
