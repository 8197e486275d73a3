// GEMV micro-kernels: one or two rows of A against one packed panel of B
// (gemm-inl.h's layout: k rows of two vectors, then the bias), for the
// projections of a decoding step; GemmTile picks them for 1 or 2 rows. The GEMM
// register tile computes all its rows whatever the live rows (up to 8: 7 of
// 8 FMAs wasted for one token); here every FMA counts, and two
// independent accumulator chains per output vector (even and odd k) keep the
// FMA latency hidden while B streams through once. Weights of any stored type
// (weight_load-inl.h) are converted in registers as they stream: with 16-bit
// weights the sums are those of the widened panel, bit for bit.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_GEMV_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_GEMV_INL_H_
#undef MHA_SRC_KERNELS_GEMV_INL_H_
#else
#define MHA_SRC_KERNELS_GEMV_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"
#include "src/kernels/register_tile-inl.h"
#include "src/kernels/weight_load-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One packed panel (weight_panel.h): k rows of weights, then the bias and,
// for int8, the scales (null otherwise).
template <class W>
struct PanelView {
  const W* HWY_RESTRICT w;
  const float* HWY_RESTRICT bias;
  const float* HWY_RESTRICT scale;
};

// Half `half` (0 or 1) of row kk of the panel, as floats.
template <class W, class D>
HWY_INLINE hn::Vec<D> PanelHalf(D d, const PanelView<W>& p, size_t kk, size_t half,
                                hn::Vec<D> scale) {
  const size_t lanes = hn::Lanes(d);
  return Dequantize<W>(LoadWeights(d, p.w + (2 * kk + half) * lanes), scale);
}

// <w>_gemv_1x2v: c[0, cols) = a . panel + bias.
template <class W>
inline void GemvPanel1(const float* HWY_RESTRICT a, const PanelView<W>& p, size_t k,
                       float* HWY_RESTRICT c, size_t cols) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto s0 = p.scale ? hn::LoadU(d, p.scale) : hn::Zero(d);
  const auto s1 = p.scale ? hn::LoadU(d, p.scale + lanes) : hn::Zero(d);
  auto e0 = hn::LoadU(d, p.bias), e1 = hn::LoadU(d, p.bias + lanes);
  auto o0 = hn::Zero(d), o1 = hn::Zero(d);
  size_t kk = 0;
  for (; kk + 2 <= k; kk += 2) {
    const auto b0 = PanelHalf(d, p, kk, 0, s0), b1 = PanelHalf(d, p, kk, 1, s1);
    const auto b2 = PanelHalf(d, p, kk + 1, 0, s0), b3 = PanelHalf(d, p, kk + 1, 1, s1);
    const auto a0 = hn::Set(d, a[kk]), a1 = hn::Set(d, a[kk + 1]);
    e0 = FusedMulAdd(a0, b0, e0);
    e1 = FusedMulAdd(a0, b1, e1);
    o0 = FusedMulAdd(a1, b2, o0);
    o1 = FusedMulAdd(a1, b3, o1);
  }
  if (kk < k) {
    const auto b0 = PanelHalf(d, p, kk, 0, s0), b1 = PanelHalf(d, p, kk, 1, s1);
    const auto a0 = hn::Set(d, a[kk]);
    e0 = FusedMulAdd(a0, b0, e0);
    e1 = FusedMulAdd(a0, b1, e1);
  }
  StoreRow(d, hn::Add(e0, o0), hn::Add(e1, o1), cols, c);
}

// <w>_gemv_2x2v: two rows of a (row stride lda) into two rows of c.
template <class W>
inline void GemvPanel2(const float* HWY_RESTRICT a, size_t lda, const PanelView<W>& p, size_t k,
                       float* HWY_RESTRICT c, size_t ldc, size_t cols) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto s0 = p.scale ? hn::LoadU(d, p.scale) : hn::Zero(d);
  const auto s1 = p.scale ? hn::LoadU(d, p.scale + lanes) : hn::Zero(d);
  const float* a2 = a + lda;
  auto x0 = hn::LoadU(d, p.bias), x1 = hn::LoadU(d, p.bias + lanes);
  auto y0 = x0, y1 = x1;
  auto u0 = hn::Zero(d), u1 = hn::Zero(d), v0 = hn::Zero(d), v1 = hn::Zero(d);
  size_t kk = 0;
  for (; kk + 2 <= k; kk += 2) {
    const auto b0 = PanelHalf(d, p, kk, 0, s0), b1 = PanelHalf(d, p, kk, 1, s1);
    const auto b2 = PanelHalf(d, p, kk + 1, 0, s0), b3 = PanelHalf(d, p, kk + 1, 1, s1);
    x0 = FusedMulAdd(hn::Set(d, a[kk]), b0, x0);
    x1 = FusedMulAdd(hn::Set(d, a[kk]), b1, x1);
    y0 = FusedMulAdd(hn::Set(d, a2[kk]), b0, y0);
    y1 = FusedMulAdd(hn::Set(d, a2[kk]), b1, y1);
    u0 = FusedMulAdd(hn::Set(d, a[kk + 1]), b2, u0);
    u1 = FusedMulAdd(hn::Set(d, a[kk + 1]), b3, u1);
    v0 = FusedMulAdd(hn::Set(d, a2[kk + 1]), b2, v0);
    v1 = FusedMulAdd(hn::Set(d, a2[kk + 1]), b3, v1);
  }
  if (kk < k) {
    const auto b0 = PanelHalf(d, p, kk, 0, s0), b1 = PanelHalf(d, p, kk, 1, s1);
    x0 = FusedMulAdd(hn::Set(d, a[kk]), b0, x0);
    x1 = FusedMulAdd(hn::Set(d, a[kk]), b1, x1);
    y0 = FusedMulAdd(hn::Set(d, a2[kk]), b0, y0);
    y1 = FusedMulAdd(hn::Set(d, a2[kk]), b1, y1);
  }
  StoreRow(d, hn::Add(x0, u0), hn::Add(x1, u1), cols, c);
  StoreRow(d, hn::Add(y0, v0), hn::Add(y1, v1), cols, c + ldc);
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_GEMV_INL_H_
