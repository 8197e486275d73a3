// The online softmax that the flash and decode kernels share, in base 2:
// scores carry the factor log2(e) (folded into the scaled queries, and into
// the masks' bias by ApplyScoreRule's unit), so each score costs one
// Exp2NonPositive. One rule for both kernels, whatever the number of query
// rows: a row with no attendable key ends NaN, and a sink joins the
// denominator of a row that has one.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_ONLINE_SOFTMAX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_ONLINE_SOFTMAX_INL_H_
#undef MHA_SRC_KERNELS_ONLINE_SOFTMAX_INL_H_
#else
#define MHA_SRC_KERNELS_ONLINE_SOFTMAX_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <limits>

#include "hwy/highway.h"
#include "src/kernels/softmax-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// log2(e): the factor base-2 scores carry.
constexpr float kLog2e = 1.44269504f;

// One tile of base-2 scores, st[c * chunk + q] for keys c < cols and rows
// q < n_pad (a multiple of the vector lanes), lane-wise per row: updates the
// running max and sum, turns st into 2^(score - max) and leaves in corr the
// factor that rescales what was accumulated before this tile. Returns whether
// any row's max grew: if not, every corr is exactly 1 and the accumulators
// need no rescaling.
inline bool OnlineSoftmaxTile(size_t cols, size_t n_pad, float* HWY_RESTRICT st, size_t chunk,
                              float* HWY_RESTRICT row_max, float* HWY_RESTRICT row_sum,
                              float* HWY_RESTRICT corr) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  const auto neg_inf = hn::Set(d, kNegInf);
  bool grew = false;
  for (size_t q = 0; q < n_pad; q += lanes) {
    const auto old_max = hn::Load(d, row_max + q);
    // The loops advance pointers: WebAssembly engines do not strength-reduce
    // c * chunk (nor does Emscripten's LLVM, which runs without LSR).
    float* const begin = st + q;
    float* const end = begin + cols * chunk;
    auto max = old_max;
    for (const float* p = begin; p != end; p += chunk) max = SoftmaxMax(max, hn::Load(d, p));
    grew = grew || !hn::AllTrue(d, hn::Eq(max, old_max));
    // Nothing attendable yet: shift by 0 so that exp(-inf) stays 0, not NaN.
    const auto shift = hn::IfThenZeroElse(hn::Eq(max, neg_inf), max);
    const auto c = Exp2NonPositive(d, hn::Sub(old_max, shift));
    auto sum = hn::Mul(hn::Load(d, row_sum + q), c);
    for (float* p = begin; p != end; p += chunk) {
      const auto e = Exp2NonPositive(d, hn::Sub(hn::Load(d, p), shift));
      hn::Store(e, d, p);
      sum = hn::Add(sum, e);
    }
    hn::Store(max, d, row_max + q);
    hn::Store(sum, d, row_sum + q);
    hn::Store(c, d, corr + q);
  }
  return grew;
}

// The same for one row whose scores are consecutive, st[c] for c < cols (st
// has room for whole vectors past cols): the keys fill the lanes, where in
// the tile above the row would fill one lane of each vector. The same
// operations per score, in the same order: the max and the sum taken key by
// key (in one lane), the exponentials lane-wise; so the same bits.
inline bool OnlineSoftmaxRow(size_t cols, float* HWY_RESTRICT st, float* HWY_RESTRICT row_max,
                             float* HWY_RESTRICT row_sum, float* HWY_RESTRICT corr) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t lanes = hn::Lanes(d);
  const auto old_max = hn::Load(d1, row_max);
  auto max = old_max;
  for (size_t c = 0; c < cols; ++c) max = SoftmaxMax(max, hn::Load(d1, st + c));
  // Nothing attendable yet: shift by 0 so that exp(-inf) stays 0, not NaN.
  const auto shift = hn::IfThenZeroElse(hn::Eq(max, hn::Set(d1, kNegInf)), max);
  const auto c = Exp2NonPositive(d1, hn::Sub(old_max, shift));
  const auto shifts = hn::Set(d, hn::GetLane(shift));
  for (size_t i = cols; i % lanes != 0; ++i) st[i] = kNegInf;
  for (size_t i = 0; i < cols; i += lanes) {
    hn::StoreU(Exp2NonPositive(d, hn::Sub(hn::LoadU(d, st + i), shifts)), d, st + i);
  }
  auto sum = hn::Mul(hn::Load(d1, row_sum), c);
  for (size_t i = 0; i < cols; ++i) sum = hn::Add(sum, hn::Load(d1, st + i));
  hn::Store(max, d1, row_max);
  hn::Store(sum, d1, row_sum);
  hn::Store(c, d1, corr);
  return hn::GetLane(max) != hn::GetLane(old_max);
}

// 1 / the softmax denominator of a row whose exponentials sum to `sum` after
// a shift by `max`: 2^(sink - max) joins it (sink in base 2, -inf: none) when
// the row attended to something; NaN when it did not.
inline float InverseDenominator(float sum, float max, float sink) {
  if (sink != kNegInf && sum > 0.0f) sum += std::exp2(sink - max);
  return sum > 0.0f ? 1.0f / sum : std::numeric_limits<float>::quiet_NaN();
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_ONLINE_SOFTMAX_INL_H_
