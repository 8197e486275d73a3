// GEMV micro-kernels: one or two rows of A against one packed panel of B
// (gemm-inl.h's layout: k rows of two vectors, then the bias), for the
// projections of a decoding step; GemmTile picks them for 1 or 2 rows. The GEMM
// register tile computes all its rows whatever the live rows (up to 8: 7 of
// 8 FMAs wasted for one token); here every FMA counts, and two
// independent accumulator chains per output vector (even and odd k) keep the
// FMA latency hidden while B streams through once. 16-bit weights
// (weight_load-inl.h) are converted in registers as they stream: the sums are
// those of the widened panel, bit for bit. int8 weights are not converted:
// they multiply the rows quantized to int16 (kernels::kInt8ActivationBlock)
// in integer dot products of pairs of inputs (i32x4.dot_i16x8_s in
// WebAssembly, pmaddwd on x86), a quarter of float32's bytes for fewer
// operations than float32's FMAs.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_GEMV_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_GEMV_INL_H_
#undef MHA_SRC_KERNELS_GEMV_INL_H_
#else
#define MHA_SRC_KERNELS_GEMV_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <cstring>

#include "hwy/highway.h"
#include "src/kernels/kernels.h"
#include "src/kernels/mul_add-inl.h"
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

// Row kk of a panel of float or 16-bit weights as floats: its two halves
// (`upper`: UpperHalfMask(d)).
template <class W, class D>
HWY_INLINE void PanelRow(D d, const PanelView<W>& p, size_t kk,
                         hn::Vec<hn::RebindToUnsigned<D>> upper, hn::Vec<D>* lo, hn::Vec<D>* hi) {
  LoadWeights(d, p.w + 2 * kk * hn::Lanes(d), upper, lo, hi);
}

// <w>_gemv_1x2v: c[0, cols) = a . panel + bias. Two inputs per iteration,
// pointers advanced by additions (as in GemvInt8).
template <class W>
inline void GemvPanel1(const float* HWY_RESTRICT a, const PanelView<W>& p, size_t k,
                       float* HWY_RESTRICT c, size_t cols) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d), row = 2 * lanes;  // weights per input
  const auto upper = UpperHalfMask(d);
  auto e0 = hn::LoadU(d, p.bias), e1 = hn::LoadU(d, p.bias + lanes);
  auto o0 = hn::Zero(d), o1 = hn::Zero(d);
  const W* HWY_RESTRICT w = p.w;
  const float* const pairs_end = a + (k & ~size_t{1});
  hn::Vec<decltype(d)> b0, b1, b2, b3;
  for (; a != pairs_end; a += 2, w += 2 * row) {
    LoadWeights(d, w, upper, &b0, &b1);
    LoadWeights(d, w + row, upper, &b2, &b3);
    const auto a0 = hn::Set(d, a[0]), a1 = hn::Set(d, a[1]);
    e0 = FusedMulAdd(a0, b0, e0);
    e1 = FusedMulAdd(a0, b1, e1);
    o0 = FusedMulAdd(a1, b2, o0);
    o1 = FusedMulAdd(a1, b3, o1);
  }
  if (k % 2 != 0) {
    LoadWeights(d, w, upper, &b0, &b1);
    const auto a0 = hn::Set(d, a[0]);
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
  const size_t lanes = hn::Lanes(d), row = 2 * lanes;
  const auto upper = UpperHalfMask(d);
  const float* HWY_RESTRICT a2 = a + lda;
  auto x0 = hn::LoadU(d, p.bias), x1 = hn::LoadU(d, p.bias + lanes);
  auto y0 = x0, y1 = x1;
  auto u0 = hn::Zero(d), u1 = hn::Zero(d), v0 = hn::Zero(d), v1 = hn::Zero(d);
  const W* HWY_RESTRICT w = p.w;
  const float* const pairs_end = a + (k & ~size_t{1});
  hn::Vec<decltype(d)> b0, b1, b2, b3;
  for (; a != pairs_end; a += 2, a2 += 2, w += 2 * row) {
    LoadWeights(d, w, upper, &b0, &b1);
    LoadWeights(d, w + row, upper, &b2, &b3);
    x0 = FusedMulAdd(hn::Set(d, a[0]), b0, x0);
    x1 = FusedMulAdd(hn::Set(d, a[0]), b1, x1);
    y0 = FusedMulAdd(hn::Set(d, a2[0]), b0, y0);
    y1 = FusedMulAdd(hn::Set(d, a2[0]), b1, y1);
    u0 = FusedMulAdd(hn::Set(d, a[1]), b2, u0);
    u1 = FusedMulAdd(hn::Set(d, a[1]), b3, u1);
    v0 = FusedMulAdd(hn::Set(d, a2[1]), b2, v0);
    v1 = FusedMulAdd(hn::Set(d, a2[1]), b3, v1);
  }
  if (k % 2 != 0) {
    LoadWeights(d, w, upper, &b0, &b1);
    x0 = FusedMulAdd(hn::Set(d, a[0]), b0, x0);
    x1 = FusedMulAdd(hn::Set(d, a[0]), b1, x1);
    y0 = FusedMulAdd(hn::Set(d, a2[0]), b0, y0);
    y1 = FusedMulAdd(hn::Set(d, a2[0]), b1, y1);
  }
  StoreRow(d, hn::Add(x0, u0), hn::Add(x1, u1), cols, c);
  StoreRow(d, hn::Add(y0, v0), hn::Add(y1, v1), cols, c + ldc);
}

// A row of A for the int8 GEMV: int16 values in pairs of inputs (an odd k
// padded with a zero) and one scale per block of kernels::kInt8ActivationBlock.
struct QuantizedRow {
  const int16_t* HWY_RESTRICT q;
  const float* HWY_RESTRICT scale;
};

// Floats of scratch QuantizeRow takes for k inputs.
inline size_t QuantizedRowSize(size_t k) {
  return (k + 1) / 2 + (k + kernels::kInt8ActivationBlock - 1) / kernels::kInt8ActivationBlock;
}

// a (k floats) quantized into `scratch` (QuantizedRowSize(k) floats): per
// block, q = round(x / s) with s = max |x| / 32767 (0 for a block of zeros),
// for any finite max (s is then a float: subnormal below max ~3.9e-34).
// A block holding an infinity or NaN gets a NaN scale, so that its outputs
// are NaN.
inline QuantizedRow QuantizeRow(const float* HWY_RESTRICT a, size_t k, float* HWY_RESTRICT scratch) {
  const size_t block = kernels::kInt8ActivationBlock;
  int16_t* q = reinterpret_cast<int16_t*>(scratch);
  float* scale = scratch + (k + 1) / 2;
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t lanes = hn::Lanes(d);
  for (size_t b0 = 0; b0 < k; b0 += block) {
    const size_t end = HWY_MIN(k, b0 + block);
    // Max |x| and, as x * 0, NaN for a non-finite x.
    auto max = hn::Zero(d), nan = hn::Zero(d);
    size_t i = b0;
    for (; i + lanes <= end; i += lanes) {
      const auto x = hn::LoadU(d, a + i);
      max = hn::Max(max, hn::Abs(x));
      nan = hn::Add(nan, hn::Mul(x, hn::Zero(d)));
    }
    float m = hn::GetLane(hn::MaxOfLanes(d, max)), bad = hn::GetLane(hn::SumOfLanes(d, nan));
    for (; i < end; ++i) {
      m = HWY_MAX(m, std::fabs(a[i]));
      bad += a[i] * 0.0f;
    }
    scale[b0 / block] = m / 32767.0f + bad;
    // 32767 / m overflows below m = 32767 / FLT_MAX (~9.6e-35), and every
    // value would saturate: such a block is first scaled up by 2^100,
    // exactly (a power of two; its values are below 2^-100), so that q is
    // the same as in exact arithmetic, on every target.
    const float up = m < 0x1p-100f ? 0x1p100f : 1.0f;
    const float inverse = m > 0.0f && bad == 0.0f ? 32767.0f / (m * up) : 0.0f;
    i = b0;
    const hn::Rebind<int16_t, decltype(d)> d16;
    const hn::Rebind<int16_t, decltype(d1)> d16_1;
    for (; i + lanes <= end; i += lanes) {
      const auto x = hn::Mul(hn::LoadU(d, a + i), hn::Set(d, up));
      hn::StoreU(hn::DemoteTo(d16, hn::NearestInt(hn::Mul(x, hn::Set(d, inverse)))), d16, q + i);
    }
    for (; i < end; ++i) {
      const auto x = hn::Mul(hn::LoadU(d1, a + i), hn::Set(d1, up));
      hn::StoreU(hn::DemoteTo(d16_1, hn::NearestInt(hn::Mul(x, hn::Set(d1, inverse)))), d16_1,
                 q + i);
    }
  }
  if (k % 2 != 0) q[k] = 0;
  return {q, scale};
}

// 8 int8 weights at w widened to int16. WebAssembly: one v128.load8x8_s,
// where Highway's half-vector load and PromoteTo stay two instructions
// (load64_zero, extend_low).
template <class D16>
HWY_INLINE hn::Vec<D16> LoadInt8AsInt16(D16 d16, const int8_t* HWY_RESTRICT w) {
#if HWY_TARGET == HWY_WASM
  (void)d16;
  return hn::Vec<D16>{wasm_i16x8_load8x8(w)};
#else
  const hn::Rebind<int8_t, D16> d8;
  return hn::PromoteTo(d16, hn::LoadU(d8, w));
#endif
}

// Accumulates the pair dot products of the weights at w (2 * Lanes(di32)
// columns' pairs, Int8Offset's order) with the activation pair `pair` (two
// int16 in one int32) into *even and *odd, in the target's arrangement:
// RearrangeToOddPlusEven(*even, *odd) then holds, per column, the sums of
// w[2p] * a[2p] + w[2p + 1] * a[2p + 1].
template <class DI>
HWY_INLINE void PairDot(DI di32, const int8_t* HWY_RESTRICT w, int32_t pair, hn::Vec<DI>* even,
                        hn::Vec<DI>* odd) {
#if HWY_TARGET == HWY_SCALAR
  (void)odd;
  int16_t a[2];
  std::memcpy(a, &pair, sizeof(a));
  *even = hn::Add(*even, hn::Set(di32, w[0] * a[0] + w[1] * a[1]));
#else
  const hn::Repartition<int16_t, DI> d16;
  *even = hn::ReorderWidenMulAccumulate(di32, LoadInt8AsInt16(d16, w),
                                        hn::BitCast(d16, hn::Set(di32, pair)), *even, *odd);
#endif
}

// int8_gemv_<rows>x2v (rows 1 or 2, row stride ldc in c): c = a . panel +
// bias, a quantized (QuantizeRow), the panel's weights q times their
// column's scale: per block, the int32 sums of q * a's int16, then as
// floats times the block's scale; times the column's scale at the end.
template <size_t kRowsA>
inline void GemvInt8(const QuantizedRow* rows, const PanelView<int8_t>& p, size_t k,
                     float* HWY_RESTRICT c, size_t ldc, size_t cols) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t lanes = hn::Lanes(d), block_pairs = kernels::kInt8ActivationBlock / 2;
  const size_t pairs = (k + 1) / 2;
  auto x0 = hn::Zero(d), x1 = hn::Zero(d), y0 = hn::Zero(d), y1 = hn::Zero(d);
  for (size_t b0 = 0; b0 < pairs; b0 += block_pairs) {
    const size_t end = HWY_MIN(pairs, b0 + block_pairs);
    // Even and odd sums (PairDot) of each output vector: x halves 0, 1; y's.
    auto xe0 = hn::Zero(di), xo0 = xe0, xe1 = xe0, xo1 = xe0;
    auto ye0 = xe0, yo0 = xe0, ye1 = xe0, yo1 = xe0;
    // One pair of inputs: its weights at `at`, rows[0]'s at x, rows[1]'s at y.
    const auto pair = [&](const int8_t* HWY_RESTRICT at, const int16_t* x, const int16_t* y) {
      int32_t a;
      std::memcpy(&a, x, sizeof(a));
      PairDot(di, at, a, &xe0, &xo0);
      PairDot(di, at + 2 * lanes, a, &xe1, &xo1);
      if constexpr (kRowsA == 2) {
        std::memcpy(&a, y, sizeof(a));
        PairDot(di, at, a, &ye0, &yo0);
        PairDot(di, at + 2 * lanes, a, &ye1, &yo1);
      }
    };
    // Two pairs per iteration, pointers advanced by additions: WebAssembly
    // engines do not strength-reduce pp * stride, and each integer op there
    // takes an issue slot from the few SIMD ones of a pair.
    const int8_t* HWY_RESTRICT w = p.w + b0 * 4 * lanes;
    const int16_t* qx = rows[0].q + 2 * b0;
    const int16_t* qy = rows[kRowsA - 1].q + 2 * b0;
    const int16_t* const qx_end = rows[0].q + 2 * end;
    for (; qx_end - qx >= 4; qx += 4, qy += 4, w += 8 * lanes) {
      pair(w, qx, qy);
      pair(w + 4 * lanes, qx + 2, qy + 2);
    }
    if (qx != qx_end) pair(w, qx, qy);
    const size_t block = b0 / block_pairs;
    const auto sx = hn::Set(d, rows[0].scale[block]);
    x0 = FusedMulAdd(hn::ConvertTo(d, hn::RearrangeToOddPlusEven(xe0, xo0)), sx, x0);
    x1 = FusedMulAdd(hn::ConvertTo(d, hn::RearrangeToOddPlusEven(xe1, xo1)), sx, x1);
    if constexpr (kRowsA == 2) {
      const auto sy = hn::Set(d, rows[1].scale[block]);
      y0 = FusedMulAdd(hn::ConvertTo(d, hn::RearrangeToOddPlusEven(ye0, yo0)), sy, y0);
      y1 = FusedMulAdd(hn::ConvertTo(d, hn::RearrangeToOddPlusEven(ye1, yo1)), sy, y1);
    }
  }
  const auto s0 = hn::LoadU(d, p.scale), s1 = hn::LoadU(d, p.scale + lanes);
  const auto b0 = hn::LoadU(d, p.bias), b1 = hn::LoadU(d, p.bias + lanes);
  StoreRow(d, FusedMulAdd(x0, s0, b0), FusedMulAdd(x1, s1, b1), cols, c);
  if constexpr (kRowsA == 2) {
    StoreRow(d, FusedMulAdd(y0, s0, b0), FusedMulAdd(y1, s1, b1), cols, c + ldc);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_GEMV_INL_H_
