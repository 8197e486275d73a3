// The register tile shared by the GEMM and the attention kernels: kRows rows
// of A, broadcast, against two vectors of columns of a k-major B.

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
#include "src/kernels/kernels.h"
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

// The attention kernel's tile: 4 rows (8 accumulators) fit the 16 registers
// of SSE4/AVX2/NEON/WASM; AVX-512's 32 registers hold 8 rows, which halves the
// broadcasts per FMA. The GEMM picks its rows at run time (gemm-inl.h).
#undef MHA_TILE_ROWS
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#define MHA_TILE_ROWS 8
#else
#define MHA_TILE_ROWS 4
#endif
constexpr size_t kTileRows = MHA_TILE_ROWS;
// Pairs of accumulators (rows times panels) RegisterTile can hold.
constexpr size_t kMaxTilePairs = 8;

// Missing rows (rows < kRows) repeat the last row: they are computed and
// never stored.
template <size_t kRows = kTileRows>
inline void TileRowPointers(const float* a, size_t lda, size_t rows, const float* out[kRows]) {
  for (size_t r = 0; r < kRows; ++r) out[r] = a + HWY_MIN(r, rows - 1) * lda;
}

template <class D, class V>
HWY_INLINE void MulAddRow(D d, const float* a, V b0, V b1, V& c0, V& c1) {
  const V av = hn::Set(d, *a);
  c0 = FusedMulAdd(av, b0, c0);
  c1 = FusedMulAdd(av, b1, c1);
}

// The same against four vectors (two panels) from one broadcast.
template <class D, class V>
HWY_INLINE void MulAddRow(D d, const float* a, V b0, V b1, V b2, V b3, V& c0, V& c1, V& c2,
                          V& c3) {
  const V av = hn::Set(d, *a);
  c0 = FusedMulAdd(av, b0, c0);
  c1 = FusedMulAdd(av, b1, c1);
  c2 = FusedMulAdd(av, b2, c2);
  c3 = FusedMulAdd(av, b3, c3);
}

// Half `half` of pair kPair's accumulators: init's for a pair of the tile,
// zero (never used) past it.
template <size_t kPair, size_t kPairs, class D, class Init>
HWY_INLINE hn::Vec<D> InitPair(D d, const Init& init, size_t half) {
  if constexpr (kPair < kPairs) {
    return init(kPair, half);
  } else {
    return hn::Zero(d);
  }
}

// Row r (< kRows) of the tile gains sum_kk a[r][kk * a_stride] * B[kk] with
// B[kk] = b + kk * ldb, in kPanels pairs of accumulators: pair s = r *
// kPanels + p holds the two vectors of columns at B[kk] + p * next (with
// kPanels 2, `next` floats on: the adjacent panel). Pair s starts as
// (init(s, 0), init(s, 1)) and goes to store(s, c0, c1). Two panels halve
// the broadcasts per multiply-add, which JavaScriptCore builds in three
// instructions where the load has an offset (k steps 2 to 4 below).
// Named accumulators, not arrays: SVE vectors are sizeless; pairs from
// kRows * kPanels on are never initialised, read or stored, and compile away.
template <size_t kRows = kTileRows, size_t kPanels = 1, class D, class Init, class Store>
HWY_INLINE void RegisterTile(D d, const float* const a[kRows], size_t a_stride,
                             const float* HWY_RESTRICT b, size_t ldb, size_t k, const Init& init,
                             const Store& store, size_t next = 0) {
  constexpr size_t kPairs = kRows * kPanels;
  static_assert(kPanels == 1 || kPanels == 2, "RegisterTile reads one or two panels");
  static_assert(kRows >= 1 && kPairs <= kMaxTilePairs, "RegisterTile holds 1 to 8 pairs");
  using V = hn::Vec<D>;
  const size_t lanes = hn::Lanes(d);
  V c00 = InitPair<0, kPairs>(d, init, 0), c01 = InitPair<0, kPairs>(d, init, 1);
  V c10 = InitPair<1, kPairs>(d, init, 0), c11 = InitPair<1, kPairs>(d, init, 1);
  V c20 = InitPair<2, kPairs>(d, init, 0), c21 = InitPair<2, kPairs>(d, init, 1);
  V c30 = InitPair<3, kPairs>(d, init, 0), c31 = InitPair<3, kPairs>(d, init, 1);
  V c40 = InitPair<4, kPairs>(d, init, 0), c41 = InitPair<4, kPairs>(d, init, 1);
  V c50 = InitPair<5, kPairs>(d, init, 0), c51 = InitPair<5, kPairs>(d, init, 1);
  V c60 = InitPair<6, kPairs>(d, init, 0), c61 = InitPair<6, kPairs>(d, init, 1);
  V c70 = InitPair<7, kPairs>(d, init, 0), c71 = InitPair<7, kPairs>(d, init, 1);
  const float* rows[kRows];
  for (size_t r = 0; r < kRows; ++r) rows[r] = a[r];
  // One k step, u steps past rows and b.
  const auto step = [&](size_t u) HWY_ATTR {
    const float* HWY_RESTRICT bu = b + u * ldb;
    const V b0 = hn::LoadU(d, bu);
    const V b1 = hn::LoadU(d, bu + lanes);
    const size_t at = u * a_stride;
    if constexpr (kPanels == 1) {
      MulAddRow(d, rows[0] + at, b0, b1, c00, c01);
      if constexpr (kRows > 1) MulAddRow(d, rows[1] + at, b0, b1, c10, c11);
      if constexpr (kRows > 2) MulAddRow(d, rows[2] + at, b0, b1, c20, c21);
      if constexpr (kRows > 3) MulAddRow(d, rows[3] + at, b0, b1, c30, c31);
      if constexpr (kRows > 4) MulAddRow(d, rows[4] + at, b0, b1, c40, c41);
      if constexpr (kRows > 5) MulAddRow(d, rows[5] + at, b0, b1, c50, c51);
      if constexpr (kRows > 6) MulAddRow(d, rows[6] + at, b0, b1, c60, c61);
      if constexpr (kRows > 7) MulAddRow(d, rows[7] + at, b0, b1, c70, c71);
    } else {
      const V b2 = hn::LoadU(d, bu + next);
      const V b3 = hn::LoadU(d, bu + next + lanes);
      MulAddRow(d, rows[0] + at, b0, b1, b2, b3, c00, c01, c10, c11);
      if constexpr (kRows > 1) MulAddRow(d, rows[1] + at, b0, b1, b2, b3, c20, c21, c30, c31);
      if constexpr (kRows > 2) MulAddRow(d, rows[2] + at, b0, b1, b2, b3, c40, c41, c50, c51);
      if constexpr (kRows > 3) MulAddRow(d, rows[3] + at, b0, b1, b2, b3, c60, c61, c70, c71);
    }
  };
  // The pointers advance by additions, not kk * stride: WebAssembly engines
  // do not strength-reduce, and each integer op there takes an issue slot
  // from the tile (attention's tiles ran faster so in V8).
#if HWY_TARGET == HWY_WASM
  // Four k steps per iteration, each followed by an exit test. The tests are
  // what keeps V8 (TurboFan) from hoisting all loads of an unrolled body to
  // its top (loads stay on the effect chain, arithmetic sinks to its uses):
  // 24 live loads spill; between branches a step holds 6. Unrolled without
  // them the tile ran slower than one step per iteration; with them the 4x2v
  // GEMM ran faster (fewer increments and loop tests per step) and
  // attention's tiles no slower. (Figures: git log --follow of this file.)
  for (size_t left = k; left != 0;) {
    step(0);
    if (--left == 0) break;
    step(1);
    if (--left == 0) break;
    step(2);
    if (--left == 0) break;
    step(3);
    --left;
    b += 4 * ldb;
    for (size_t r = 0; r < kRows; ++r) rows[r] += 4 * a_stride;
  }
#else
  for (size_t kk = 0; kk < k; ++kk, b += ldb) {
    step(0);
    for (size_t r = 0; r < kRows; ++r) rows[r] += a_stride;
  }
#endif
  store(0, c00, c01);
  if constexpr (kPairs > 1) store(1, c10, c11);
  if constexpr (kPairs > 2) store(2, c20, c21);
  if constexpr (kPairs > 3) store(3, c30, c31);
  if constexpr (kPairs > 4) store(4, c40, c41);
  if constexpr (kPairs > 5) store(5, c50, c51);
  if constexpr (kPairs > 6) store(6, c60, c61);
  if constexpr (kPairs > 7) store(7, c70, c71);
}

// Range r within [lo, hi).
inline kernels::KeyRange Clip(kernels::KeyRange r, size_t lo, size_t hi) {
  const size_t begin = HWY_MIN(HWY_MAX(r.begin, lo), hi);
  return {begin, HWY_MAX(begin, HWY_MIN(r.end, hi))};
}

// acc += sum_j p[(j - j0) * chunk] * V[j] over keys [begin, end) (value rows
// `v_stride` floats apart from key j0's, v_pad floats each): one query's keys
// that its tile's register tile leaves (ScoreRule::Keys differ by query).
inline void AddKeys(const float* HWY_RESTRICT p, size_t chunk, const float* HWY_RESTRICT v,
                    size_t v_stride, size_t v_pad, size_t j0, size_t begin, size_t end,
                    float* HWY_RESTRICT acc) {
  const hn::ScalableTag<float> d;
  for (size_t j = begin; j < end; ++j) {
    const auto pj = hn::Set(d, p[(j - j0) * chunk]);
    const float* HWY_RESTRICT row = v + (j - j0) * v_stride;
    for (size_t e = 0; e < v_pad; e += hn::Lanes(d)) {
      hn::StoreU(FusedMulAdd(pj, hn::LoadU(d, row + e), hn::LoadU(d, acc + e)), d, acc + e);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_REGISTER_TILE_INL_H_
