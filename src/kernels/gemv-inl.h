// GEMV micro-kernels: one or two rows of A against one packed panel of B
// (gemm-inl.h's layout: k rows of two vectors, then the bias), for the
// projections of a decoding step; GemmTile picks them for 1 or 2 rows. The GEMM
// register tile computes all its rows whatever the live rows (up to 8: 7 of
// 8 FMAs wasted for one token); here every FMA counts, and two
// independent accumulator chains per output vector (even and odd k) keep the
// FMA latency hidden while B streams through once.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_GEMV_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_GEMV_INL_H_
#undef MHA_SRC_KERNELS_GEMV_INL_H_
#else
#define MHA_SRC_KERNELS_GEMV_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"
#include "src/kernels/register_tile-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// f32_gemv_1x2v: c[0, cols) = a . panel + bias.
inline void GemvPanel1(const float* HWY_RESTRICT a, const float* HWY_RESTRICT panel, size_t k,
                       float* HWY_RESTRICT c, size_t cols) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d), width = 2 * lanes;
  const float* bias = panel + k * width;
  auto e0 = hn::LoadU(d, bias), e1 = hn::LoadU(d, bias + lanes);
  auto o0 = hn::Zero(d), o1 = hn::Zero(d);
  size_t kk = 0;
  for (; kk + 2 <= k; kk += 2) {
    const float* b = panel + kk * width;
    const auto a0 = hn::Set(d, a[kk]), a1 = hn::Set(d, a[kk + 1]);
    e0 = hn::MulAdd(a0, hn::LoadU(d, b), e0);
    e1 = hn::MulAdd(a0, hn::LoadU(d, b + lanes), e1);
    o0 = hn::MulAdd(a1, hn::LoadU(d, b + width), o0);
    o1 = hn::MulAdd(a1, hn::LoadU(d, b + width + lanes), o1);
  }
  if (kk < k) {
    const float* b = panel + kk * width;
    const auto a0 = hn::Set(d, a[kk]);
    e0 = hn::MulAdd(a0, hn::LoadU(d, b), e0);
    e1 = hn::MulAdd(a0, hn::LoadU(d, b + lanes), e1);
  }
  StoreRow(d, hn::Add(e0, o0), hn::Add(e1, o1), cols, c);
}

// f32_gemv_2x2v: two rows of a (row stride lda) into two rows of c.
inline void GemvPanel2(const float* HWY_RESTRICT a, size_t lda, const float* HWY_RESTRICT panel,
                       size_t k, float* HWY_RESTRICT c, size_t ldc, size_t cols) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d), width = 2 * lanes;
  const float* bias = panel + k * width;
  const float* a2 = a + lda;
  auto x0 = hn::LoadU(d, bias), x1 = hn::LoadU(d, bias + lanes);
  auto y0 = x0, y1 = x1;
  auto u0 = hn::Zero(d), u1 = hn::Zero(d), v0 = hn::Zero(d), v1 = hn::Zero(d);
  size_t kk = 0;
  for (; kk + 2 <= k; kk += 2) {
    const float* b = panel + kk * width;
    const auto b0 = hn::LoadU(d, b), b1 = hn::LoadU(d, b + lanes);
    const auto b2 = hn::LoadU(d, b + width), b3 = hn::LoadU(d, b + width + lanes);
    x0 = hn::MulAdd(hn::Set(d, a[kk]), b0, x0);
    x1 = hn::MulAdd(hn::Set(d, a[kk]), b1, x1);
    y0 = hn::MulAdd(hn::Set(d, a2[kk]), b0, y0);
    y1 = hn::MulAdd(hn::Set(d, a2[kk]), b1, y1);
    u0 = hn::MulAdd(hn::Set(d, a[kk + 1]), b2, u0);
    u1 = hn::MulAdd(hn::Set(d, a[kk + 1]), b3, u1);
    v0 = hn::MulAdd(hn::Set(d, a2[kk + 1]), b2, v0);
    v1 = hn::MulAdd(hn::Set(d, a2[kk + 1]), b3, v1);
  }
  if (kk < k) {
    const float* b = panel + kk * width;
    const auto b0 = hn::LoadU(d, b), b1 = hn::LoadU(d, b + lanes);
    x0 = hn::MulAdd(hn::Set(d, a[kk]), b0, x0);
    x1 = hn::MulAdd(hn::Set(d, a[kk]), b1, x1);
    y0 = hn::MulAdd(hn::Set(d, a2[kk]), b0, y0);
    y1 = hn::MulAdd(hn::Set(d, a2[kk]), b1, y1);
  }
  StoreRow(d, hn::Add(x0, u0), hn::Add(x1, u1), cols, c);
  StoreRow(d, hn::Add(y0, v0), hn::Add(y1, v1), cols, c + ldc);
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_GEMV_INL_H_
