// Rotary position embedding (RoPE) of one projected row: each head's first
// `dim` features form dim/2 pairs (a, b), turned by the pair's angle:
// (a, b) -> (a cos - b sin, b cos + a sin). Pair i is (i, i + dim/2)
// (rotate_half: GPT-NeoX, Llama) or, interleaved, (2i, 2i+1) (GPT-J).
// The angles (position * base^(-2i/dim)) come precomputed as cos/sin rows
// (src/attention/rotary.cc), so the kernel is only multiplies and adds.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_ROTARY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_ROTARY_INL_H_
#undef MHA_SRC_KERNELS_ROTARY_INL_H_
#else
#define MHA_SRC_KERNELS_ROTARY_INL_H_
#endif

#include <cstddef>

#include "hwy/highway.h"
#include "src/kernels/mul_add-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Rotates pairs [i, i + lanes) of one head; a and b are the pairs' features.
template <class D, class V = hn::Vec<D>>
HWY_INLINE void RotatePairs(D d, const float* HWY_RESTRICT cos, const float* HWY_RESTRICT sin,
                            size_t i, V& a, V& b) {
  const V c = hn::LoadU(d, cos + i), s = hn::LoadU(d, sin + i);
  const V a_new = FusedNegMulAdd(b, s, hn::Mul(a, c));
  b = FusedMulAdd(a, s, hn::Mul(b, c));
  a = a_new;
}

// x: num_heads heads of head_stride floats; cos, sin: dim/2 floats, pair i
// at index i. dim is even and <= head_stride. In place.
inline void RotateHeads(float* HWY_RESTRICT x, size_t num_heads, size_t head_stride, size_t dim,
                        bool interleaved, const float* HWY_RESTRICT cos,
                        const float* HWY_RESTRICT sin) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;  // the pairs past the last whole vector
  const size_t lanes = hn::Lanes(d), half = dim / 2;
  for (size_t h = 0; h < num_heads; ++h) {
    float* head = x + h * head_stride;
    size_t i = 0;
    if (interleaved) {
      for (; i + lanes <= half; i += lanes) {
        hn::Vec<decltype(d)> a, b;
        hn::LoadInterleaved2(d, head + 2 * i, a, b);
        RotatePairs(d, cos, sin, i, a, b);
        hn::StoreInterleaved2(a, b, d, head + 2 * i);
      }
      for (; i < half; ++i) {
        auto a = hn::LoadU(d1, head + 2 * i), b = hn::LoadU(d1, head + 2 * i + 1);
        RotatePairs(d1, cos, sin, i, a, b);
        hn::StoreU(a, d1, head + 2 * i);
        hn::StoreU(b, d1, head + 2 * i + 1);
      }
    } else {
      for (; i + lanes <= half; i += lanes) {
        auto a = hn::LoadU(d, head + i), b = hn::LoadU(d, head + half + i);
        RotatePairs(d, cos, sin, i, a, b);
        hn::StoreU(a, d, head + i);
        hn::StoreU(b, d, head + half + i);
      }
      for (; i < half; ++i) {
        auto a = hn::LoadU(d1, head + i), b = hn::LoadU(d1, head + half + i);
        RotatePairs(d1, cos, sin, i, a, b);
        hn::StoreU(a, d1, head + i);
        hn::StoreU(b, d1, head + half + i);
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_ROTARY_INL_H_
