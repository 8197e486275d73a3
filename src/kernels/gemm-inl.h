// GEMM micro-kernel: C = A * B^T + bias with B packed into panels.
//
// A panel holds kPanelVectors vectors of columns of B, k-major, followed by
// one row of bias, so the 4x(kPanelVectors) register tile streams through
// contiguous memory and needs no bounds checks: padding columns are zero.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_GEMM_INL_H_
#undef MHA_SRC_KERNELS_GEMM_INL_H_
#else
#define MHA_SRC_KERNELS_GEMM_INL_H_
#endif

#include <cstddef>
#include <cstring>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kPanelVectors = 2;

inline size_t GemmPanelWidth() {
  const hn::ScalableTag<float> d;
  return kPanelVectors * hn::Lanes(d);
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

// Stores `cols` (<= Lanes) leading lanes of v to p.
template <class D, class V>
HWY_INLINE void StorePartial(D d, V v, size_t cols, float* HWY_RESTRICT p) {
  if (cols >= hn::Lanes(d)) {
    hn::StoreU(v, d, p);
  } else if (cols > 0) {
    HWY_ALIGN float lanes[hn::MaxLanes(d)];
    hn::Store(v, d, lanes);
    std::memcpy(p, lanes, cols * sizeof(float));
  }
}

// Writes `cols` columns of one C row from two accumulators.
template <class D, class V>
HWY_INLINE void StoreRow(D d, V acc0, V acc1, size_t cols, float* HWY_RESTRICT c) {
  const size_t lanes = hn::Lanes(d);
  if (cols >= 2 * lanes) {
    hn::StoreU(acc0, d, c);
    hn::StoreU(acc1, d, c + lanes);
  } else {
    StorePartial(d, acc0, cols, c);
    if (cols > lanes) StorePartial(d, acc1, cols - lanes, c + lanes);
  }
}

// The 4x2v register tile, shared by the GEMM and the attention kernels: four
// rows of A against two vectors of columns of a k-major B. Missing rows
// (rows < 4) repeat the last row: they are computed and never stored.
inline void RowPointers4(const float* a, size_t lda, size_t rows, const float* out[4]) {
  for (size_t r = 0; r < 4; ++r) out[r] = a + HWY_MIN(r, rows - 1) * lda;
}

// c_r0 += sum_kk a[r][kk * a_stride] * B[kk][0, lanes), c_r1 likewise with
// B[kk][lanes, 2 lanes), where B[kk] = b + kk * ldb: 8 accumulators, 2 loads
// and 4 broadcasts per kk, which fits the 16 registers of SSE4/AVX2/NEON/WASM.
template <class D, class V>
HWY_INLINE void MulAdd4x2v(D d, const float* const a[4], size_t a_stride,
                           const float* HWY_RESTRICT b, size_t ldb, size_t k, V& c00, V& c01, V& c10, V& c11, V& c20,
                           V& c21, V& c30, V& c31) {
  const size_t lanes = hn::Lanes(d);
  for (size_t kk = 0; kk < k; ++kk) {
    const V b0 = hn::LoadU(d, b + kk * ldb);
    const V b1 = hn::LoadU(d, b + kk * ldb + lanes);
    V av = hn::Set(d, a[0][kk * a_stride]);
    c00 = hn::MulAdd(av, b0, c00);
    c01 = hn::MulAdd(av, b1, c01);
    av = hn::Set(d, a[1][kk * a_stride]);
    c10 = hn::MulAdd(av, b0, c10);
    c11 = hn::MulAdd(av, b1, c11);
    av = hn::Set(d, a[2][kk * a_stride]);
    c20 = hn::MulAdd(av, b0, c20);
    c21 = hn::MulAdd(av, b1, c21);
    av = hn::Set(d, a[3][kk * a_stride]);
    c30 = hn::MulAdd(av, b0, c30);
    c31 = hn::MulAdd(av, b1, c31);
  }
}

// Stores `cols` columns of the first `rows` rows of the tile at c (row stride ldc).
template <class D, class V>
HWY_INLINE void StoreRows4x2v(D d, size_t rows, size_t cols, float* HWY_RESTRICT c, size_t ldc,
                              V c00, V c01, V c10, V c11, V c20, V c21, V c30, V c31) {
  StoreRow(d, c00, c01, cols, c);
  if (rows > 1) StoreRow(d, c10, c11, cols, c + ldc);
  if (rows > 2) StoreRow(d, c20, c21, cols, c + 2 * ldc);
  if (rows > 3) StoreRow(d, c30, c31, cols, c + 3 * ldc);
}

// f32_gemm_4x2v: up to 4 rows of A against one packed panel.
inline void GemmPanel4x2v(const float* a, size_t lda, size_t rows, const float* panel,
                          size_t k, float* c, size_t ldc, size_t cols) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const size_t width = 2 * lanes;
  const float* a_rows[4];
  RowPointers4(a, lda, rows, a_rows);
  const float* bias = panel + k * width;
  auto c00 = hn::LoadU(d, bias), c01 = hn::LoadU(d, bias + lanes);
  auto c10 = c00, c11 = c01, c20 = c00, c21 = c01, c30 = c00, c31 = c01;
  MulAdd4x2v(d, a_rows, 1, panel, width, k, c00, c01, c10, c11, c20, c21, c30, c31);
  StoreRows4x2v(d, rows, cols, c, ldc, c00, c01, c10, c11, c20, c21, c30, c31);
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// f32_gemm_8x2v: AVX-512's 32 registers hold 16 accumulators, which halves
// the broadcasts per FMA of the 4x2v tile. Missing rows repeat the last.
inline void GemmPanel8x2v(const float* a, size_t lda, size_t rows, const float* panel,
                          size_t k, float* c, size_t ldc, size_t cols) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const size_t lanes = hn::Lanes(d);
  const size_t width = 2 * lanes;
  const float* row_ptr[8];
  V acc0[8], acc1[8];
  for (size_t r = 0; r < 8; ++r) {
    row_ptr[r] = a + HWY_MIN(r, rows - 1) * lda;
    acc0[r] = hn::LoadU(d, panel + k * width);
    acc1[r] = hn::LoadU(d, panel + k * width + lanes);
  }
  for (size_t kk = 0; kk < k; ++kk) {
    const V b0 = hn::LoadU(d, panel + kk * width);
    const V b1 = hn::LoadU(d, panel + kk * width + lanes);
    for (size_t r = 0; r < 8; ++r) {
      const V av = hn::Set(d, row_ptr[r][kk]);
      acc0[r] = hn::MulAdd(av, b0, acc0[r]);
      acc1[r] = hn::MulAdd(av, b1, acc1[r]);
    }
  }
  for (size_t r = 0; r < rows; ++r) StoreRow(d, acc0[r], acc1[r], cols, c + r * ldc);
}
constexpr size_t kGemmRows = 8;
#define MHA_GEMM_PANEL GemmPanel8x2v
#else
constexpr size_t kGemmRows = 4;
#define MHA_GEMM_PANEL GemmPanel4x2v
#endif

inline void GemmTile(const float* a, size_t lda, const float* packed, size_t n, size_t k,
                     float* c, size_t ldc, size_t row_begin, size_t row_end,
                     size_t col_begin, size_t col_end) {
  const size_t width = GemmPanelWidth();
  for (size_t col0 = col_begin; col0 < col_end; col0 += width) {
    const float* panel = packed + (col0 / width) * (k + 1) * width;
    const size_t limit = col_end < n ? col_end : n;
    const size_t cols = limit - col0 < width ? limit - col0 : width;
    for (size_t row = row_begin; row < row_end; row += kGemmRows) {
      const size_t rows = row_end - row < kGemmRows ? row_end - row : kGemmRows;
      MHA_GEMM_PANEL(a + row * lda, lda, rows, panel, k, c + row * ldc + col0, ldc, cols);
    }
  }
}

#undef MHA_GEMM_PANEL

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_GEMM_INL_H_
