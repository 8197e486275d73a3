// q/k norms of one projected row (docs/design.md, "The attention of today's
// models", step 2): the row is `groups` groups of `width` floats (each head's
// features, or the whole row as one group), each normalized by its own
// statistics in float32, then scaled by the weights (and shifted by the
// biases) of its features:
//   RMSNorm:   x / sqrt(mean(x^2) + eps) * w
//   LayerNorm: (x - mean) / sqrt(var + eps) * w + b, var biased (nn.LayerNorm)
// w (and b) hold groups * width floats: per-feature, whatever the checkpoint
// shared (the loader repeats a weight shared by the heads; Gemma 3's 1 + w is
// added there too).

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_QK_NORM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_QK_NORM_INL_H_
#undef MHA_SRC_KERNELS_QK_NORM_INL_H_
#else
#define MHA_SRC_KERNELS_QK_NORM_INL_H_
#endif

#include <cmath>
#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sum of (x[i] - center)^2, i < n.
inline float SumSquares(const float* HWY_RESTRICT x, size_t n, float center) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto c = hn::Set(d, center);
  auto acc = hn::Zero(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto t = hn::Sub(hn::LoadU(d, x + i), c);
    acc = hn::MulAdd(t, t, acc);
  }
  float sum = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; i < n; ++i) sum += (x[i] - center) * (x[i] - center);
  return sum;
}

inline float Sum(const float* HWY_RESTRICT x, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  auto acc = hn::Zero(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) acc = hn::Add(hn::LoadU(d, x + i), acc);
  float sum = hn::GetLane(hn::SumOfLanes(d, acc));
  for (; i < n; ++i) sum += x[i];
  return sum;
}

// x[at..] <- ((x - center) * r) * w (+ b) for one vector of D; b may be null.
template <class D>
HWY_INLINE void ScaleShiftAt(D d, float* HWY_RESTRICT x, size_t at, float center, float r,
                             const float* HWY_RESTRICT w, const float* HWY_RESTRICT b) {
  auto y = hn::Mul(hn::Mul(hn::Sub(hn::LoadU(d, x + at), hn::Set(d, center)), hn::Set(d, r)),
                   hn::LoadU(d, w + at));
  if (b != nullptr) y = hn::Add(y, hn::LoadU(d, b + at));
  hn::StoreU(y, d, x + at);
}

inline void ScaleShift(float* HWY_RESTRICT x, size_t n, float center, float r,
                       const float* HWY_RESTRICT w, const float* HWY_RESTRICT b) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;  // the features past the last whole vector
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) ScaleShiftAt(d, x, i, center, r, w, b);
  for (; i < n; ++i) ScaleShiftAt(d1, x, i, center, r, w, b);
}

// Normalizes the `groups` groups of `width` floats of row x in place
// (layer: LayerNorm, else RMSNorm); w, b: groups * width floats, b may be null.
inline void NormalizeGroups(float* HWY_RESTRICT x, size_t groups, size_t width, bool layer,
                            float eps, const float* HWY_RESTRICT w,
                            const float* HWY_RESTRICT b) {
  const float n = static_cast<float>(width);
  for (size_t g = 0; g < groups; ++g) {
    float* group = x + g * width;
    const float mean = layer ? Sum(group, width) / n : 0.0f;
    const float r = 1.0f / std::sqrt(SumSquares(group, width, mean) / n + eps);
    ScaleShift(group, width, mean, r, w + g * width, b != nullptr ? b + g * width : nullptr);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_QK_NORM_INL_H_
