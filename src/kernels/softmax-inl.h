// Row softmax over a float row, in place, as torch.softmax: exp(x - max) / sum.
// A row of only -inf (every key masked) becomes NaN, as in PyTorch.

#if defined(MHA_SRC_KERNELS_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_SOFTMAX_INL_H_
#undef MHA_SRC_KERNELS_SOFTMAX_INL_H_
#else
#define MHA_SRC_KERNELS_SOFTMAX_INL_H_
#endif

#include <cstddef>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Max of n floats (n >= 1); -inf for an all -inf row, NaN if any is NaN.
inline float RowMax(const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  float result = -std::numeric_limits<float>::infinity();
  size_t i = 0;
  if (n >= lanes) {
    auto m = hn::LoadU(d, x);
    for (i = lanes; i + lanes <= n; i += lanes) m = hn::Max(m, hn::LoadU(d, x + i));
    result = hn::GetLane(hn::MaxOfLanes(d, m));
  }
  for (; i < n; ++i) result = x[i] > result ? x[i] : result;
  return result;
}

// exp(x) lane-wise, where a NaN stays NaN: hn::Exp clamps its argument,
// which would turn a NaN into ~0 and silently drop the key, and must not see
// NaN at all (UB on EMU128). As in PyTorch, a NaN score makes its row NaN.
template <class D, class V>
HWY_INLINE V ExpKeepNaN(D d, V x) {
  const auto nan = hn::IsNaN(x);
  return hn::IfThenElse(nan, x, hn::Exp(d, hn::IfThenZeroElse(nan, x)));
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
    const auto e = ExpKeepNaN(d, hn::Sub(hn::LoadU(d, x + i), vshift));
    hn::StoreU(e, d, x + i);
    vsum = hn::Add(vsum, e);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
  for (; i < n; ++i) {
    x[i] = hn::GetLane(ExpKeepNaN(d1, hn::Set(d1, x[i] - shift)));
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

inline void SoftmaxRow(float* HWY_RESTRICT x, size_t n) {
  const float max = RowMax(x, n);
  if (max == -std::numeric_limits<float>::infinity()) {
    for (size_t i = 0; i < n; ++i) x[i] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float sum = ExpShiftSum(x, n, max);
  MulRow(x, n, 1.0f / sum);
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_SOFTMAX_INL_H_
