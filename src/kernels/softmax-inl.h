// Row softmax over a float row, in place, as torch.softmax: exp(x - max) / sum.
// A row of only -inf (every key masked) becomes NaN, as in PyTorch.

#if defined(MHA_SRC_KERNELS_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_SOFTMAX_INL_H_
#undef MHA_SRC_KERNELS_SOFTMAX_INL_H_
#else
#define MHA_SRC_KERNELS_SOFTMAX_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <limits>

#include "hwy/highway.h"
#include "src/kernels/mul_add-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Max of n floats (n >= 1); -inf for an all -inf row. A NaN may be dropped
// from the max, but its exponential is NaN either way and its row ends NaN.
inline float RowMax(const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  float result = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  if (n >= lanes) {
    auto m = hn::LoadU(d, x);
    for (i = lanes; i + lanes <= n; i += lanes) m = hn::Max(m, hn::LoadU(d, x + i));
    // Lane by lane, not hn::MaxOfLanes: on EMU128 (Highway 1.0.3) that starts
    // from -FLT_MAX, which would make a row with every key masked finite.
    HWY_ALIGN float part[hn::MaxLanes(d)];
    hn::Store(m, d, part);
    for (size_t k = 0; k < lanes; ++k) result = part[k] > result ? part[k] : result;
  }
  for (; i < n; ++i) result = x[i] > result ? x[i] : result;
  return result;
}

// exp(x) for x <= 0 (scores minus their max), NaN or -inf, in fewer operations
// than hn::Exp (which handles any x). As in Cephes' expf: x = n ln2 + r with
// |r| <= ln2 / 2, exp(r) by a degree-7 polynomial, 2^n from the exponent
// bits. Below -87.3 (2^n no longer normal, exp(x) < 1.2e-38) it returns 0, so
// masked keys weigh exactly 0; a NaN stays NaN, so, as in PyTorch, a NaN
// score makes its row NaN (hn::Exp would clamp it to ~0 and drop the key).
template <class D, class V>
HWY_INLINE V ExpNonPositive(D d, V x) {
  const hn::RebindToUnsigned<D> du;
  // Adding 1.5 * 2^23 rounds x log2(e) to an integer n held in the low
  // mantissa bits, here biased by 127: the exponent field of 2^n.
  const auto magic = hn::Set(d, 12582912.0f + 127.0f);
  const auto t = FusedMulAdd(x, hn::Set(d, 1.44269504f), magic);
  const auto n = hn::Sub(t, magic);
  auto r = hn::NegMulAdd(n, hn::Set(d, 0.693359375f), x);  // ln2 in two parts
  r = hn::NegMulAdd(n, hn::Set(d, -2.12194440e-4f), r);
  auto p = hn::Set(d, 1.9875691500e-4f);
  p = FusedMulAdd(p, r, hn::Set(d, 1.3981999507e-3f));
  p = FusedMulAdd(p, r, hn::Set(d, 8.3334519073e-3f));
  p = FusedMulAdd(p, r, hn::Set(d, 4.1665795894e-2f));
  p = FusedMulAdd(p, r, hn::Set(d, 1.6666665459e-1f));
  p = FusedMulAdd(p, r, hn::Set(d, 5.0000001201e-1f));
  p = FusedMulAdd(p, r, hn::Set(d, 1.0f));
  p = FusedMulAdd(p, r, hn::Set(d, 1.0f));
  const auto scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(du, t)));
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -87.3f)), hn::Mul(p, scale));
}

// The online softmax's running max. WebAssembly: f32x4.pmax (a < b ? b : a),
// one instruction where f32x4.max (exact for NaN and -0) is a sequence in V8
// on x64; a NaN in b is dropped, one in a stays. A NaN score may so stay out
// of the max, but its exponential is NaN either way and its row ends NaN.
template <class V>
HWY_INLINE V SoftmaxMax(V a, V b) {
#if HWY_TARGET == HWY_WASM
  return V{__builtin_wasm_pmax_f32x4(a.raw, b.raw)};
#else
  return hn::Max(a, b);
#endif
}

// 2^y for y <= 0 (and on up to 126: Softcap's), NaN or -inf, in fewer
// operations than ExpNonPositive: y = n + f with |f| <= 1/2 exactly, no ln 2
// to split in two; 2^f by a degree-5 polynomial fitted for relative error
// (reweighted least squares toward minimax: within float32's rounding, where
// degree 6 would cost one more multiply-add per score for little), 2^n from
// the exponent bits. It returns 0 from -127
// down (masked keys weigh exactly 0), 0 or 2^y within 2^-126 between -127 and
// -126, and NaN for NaN. The flash kernel works in base 2 (its scores carry
// the factor log2(e)), so each score costs this and no more.
template <class D, class V>
HWY_INLINE V Exp2NonPositive(D d, V y) {
  const hn::RebindToUnsigned<D> du;
#if HWY_TARGET == HWY_WASM
  // y >= -127 (-inf included; a NaN stays): n = -127 then has no exponent
  // bits and 2^n below is 0. One f32x4.pmax where the compare and select at
  // the end took four instructions in V8 (LLVM makes the and-not a bitselect).
  y = SoftmaxMax(y, hn::Set(d, -127.0f));
#endif
  // Adding 1.5 * 2^23 rounds y to an integer n held in the low mantissa
  // bits, here biased by 127: the exponent field of 2^n.
  const auto magic = hn::Set(d, 12582912.0f + 127.0f);
  const auto t = hn::Add(y, magic);
  const auto f = hn::Sub(y, hn::Sub(t, magic));
  auto p = hn::Set(d, 1.326473895e-3f);
  p = FusedMulAdd(p, f, hn::Set(d, 9.671515785e-3f));
  p = FusedMulAdd(p, f, hn::Set(d, 5.550733581e-2f));
  p = FusedMulAdd(p, f, hn::Set(d, 2.402224243e-1f));
  p = FusedMulAdd(p, f, hn::Set(d, 6.931470037e-1f));
  p = FusedMulAdd(p, f, hn::Set(d, 1.0f));
  const auto scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(du, t)));
#if HWY_TARGET == HWY_WASM
  return hn::Mul(p, scale);
#else
  return hn::IfThenZeroElse(hn::Lt(y, hn::Set(d, -126.0f)), hn::Mul(p, scale));
#endif
}

// x[i] = exp(x[i] - shift) for i < n; returns their sum.
inline float ExpShiftSum(float* HWY_RESTRICT x, size_t n, float shift) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t lanes = hn::Lanes(d);
  const auto vshift = hn::Set(d, shift);
  auto vsum = hn::Zero(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto e = ExpNonPositive(d, hn::Sub(hn::LoadU(d, x + i), vshift));
    hn::StoreU(e, d, x + i);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; i < n; ++i) {
    x[i] = hn::GetLane(ExpNonPositive(d1, hn::Set(d1, x[i] - shift)));
    sum += x[i];
  }
  return sum;
}

inline void MulRow(float* HWY_RESTRICT x, size_t n, float factor) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto vf = hn::Set(d, factor);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), vf), d, x + i);
  for (; i < n; ++i) x[i] *= factor;
}

// With a sink, e^sink joins the denominator; a row of -inf is NaN all the same.
inline void SoftmaxRow(float* HWY_RESTRICT x, size_t n,
                       float sink = -std::numeric_limits<float>::infinity()) {
  const float max = RowMax(x, n);
  if (max == -std::numeric_limits<float>::infinity()) {
    for (size_t i = 0; i < n; ++i) x[i] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float sum = ExpShiftSum(x, n, max) + std::exp(sink - max);
  MulRow(x, n, 1.0f / sum);
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_SOFTMAX_INL_H_
