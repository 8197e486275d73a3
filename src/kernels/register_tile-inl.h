// The register tile shared by the GEMM and the attention kernels: kTileRows
// rows of A, broadcast, against two vectors of columns of a k-major B.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_REGISTER_TILE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_REGISTER_TILE_INL_H_
#undef MHA_SRC_KERNELS_REGISTER_TILE_INL_H_
#else
#define MHA_SRC_KERNELS_REGISTER_TILE_INL_H_
#endif

#include <cstddef>
#include <cstring>

#include "hwy/highway.h"
#include "src/kernels/mul_add-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

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

// 4 rows (8 accumulators) fit the 16 registers of SSE4/AVX2/NEON/WASM;
// AVX-512's 32 registers hold 8 rows, which halves the broadcasts per FMA.
#undef MHA_TILE_ROWS
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define MHA_TILE_ROWS 8
#else
#define MHA_TILE_ROWS 4
#endif
constexpr size_t kTileRows = MHA_TILE_ROWS;

// Missing rows (rows < kTileRows) repeat the last row: they are computed and
// never stored.
inline void TileRowPointers(const float* a, size_t lda, size_t rows, const float* out[kTileRows]) {
  for (size_t r = 0; r < kTileRows; ++r) out[r] = a + HWY_MIN(r, rows - 1) * lda;
}

template <class D, class V>
HWY_INLINE void MulAddRow(D d, const float* a, V b0, V b1, V& c0, V& c1) {
  const V av = hn::Set(d, *a);
  c0 = FusedMulAdd(av, b0, c0);
  c1 = FusedMulAdd(av, b1, c1);
}

// Row r of the tile starts as (init(r, 0), init(r, 1)), gains
// sum_kk a[r][kk * a_stride] * (B[kk][0, lanes), B[kk][lanes, 2 lanes)) with
// B[kk] = b + kk * ldb, and goes to store(r, c0, c1). Named accumulators, not
// arrays: SVE vectors are sizeless.
template <class D, class Init, class Store>
HWY_INLINE void RegisterTile(D d, const float* const a[kTileRows], size_t a_stride,
                             const float* HWY_RESTRICT b, size_t ldb, size_t k, const Init& init,
                             const Store& store) {
  using V = hn::Vec<D>;
  const size_t lanes = hn::Lanes(d);
  V c00 = init(0, 0), c01 = init(0, 1), c10 = init(1, 0), c11 = init(1, 1);
  V c20 = init(2, 0), c21 = init(2, 1), c30 = init(3, 0), c31 = init(3, 1);
#if MHA_TILE_ROWS == 8
  V c40 = init(4, 0), c41 = init(4, 1), c50 = init(5, 0), c51 = init(5, 1);
  V c60 = init(6, 0), c61 = init(6, 1), c70 = init(7, 0), c71 = init(7, 1);
#endif
  for (size_t kk = 0; kk < k; ++kk) {
    const V b0 = hn::LoadU(d, b + kk * ldb);
    const V b1 = hn::LoadU(d, b + kk * ldb + lanes);
    const size_t offset = kk * a_stride;
    MulAddRow(d, a[0] + offset, b0, b1, c00, c01);
    MulAddRow(d, a[1] + offset, b0, b1, c10, c11);
    MulAddRow(d, a[2] + offset, b0, b1, c20, c21);
    MulAddRow(d, a[3] + offset, b0, b1, c30, c31);
#if MHA_TILE_ROWS == 8
    MulAddRow(d, a[4] + offset, b0, b1, c40, c41);
    MulAddRow(d, a[5] + offset, b0, b1, c50, c51);
    MulAddRow(d, a[6] + offset, b0, b1, c60, c61);
    MulAddRow(d, a[7] + offset, b0, b1, c70, c71);
#endif
  }
  store(0, c00, c01);
  store(1, c10, c11);
  store(2, c20, c21);
  store(3, c30, c31);
#if MHA_TILE_ROWS == 8
  store(4, c40, c41);
  store(5, c50, c51);
  store(6, c60, c61);
  store(7, c70, c71);
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_REGISTER_TILE_INL_H_
