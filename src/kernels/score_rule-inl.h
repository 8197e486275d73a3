// ScoreRule (kernels.h) applied to a block of scores: the one place that
// says which keys a query sees and with what bias, for the flash kernel's
// score tiles (and its weights path) and the decode kernel's rows.

// Toggling include guard: compiled once per target (foreach_target.h).
#if defined(MHA_SRC_KERNELS_SCORE_RULE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MHA_SRC_KERNELS_SCORE_RULE_INL_H_
#undef MHA_SRC_KERNELS_SCORE_RULE_INL_H_
#else
#define MHA_SRC_KERNELS_SCORE_RULE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>

#include "hwy/highway.h"
#include "src/kernels/kernels.h"
#include "src/kernels/softmax-inl.h"

HWY_BEFORE_NAMESPACE();
namespace mha {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// cap * tanh(x / cap) as cap - 2 cap / (1 + 2^(k x)), k = 2 log2(e) / cap,
// by the softmax's Exp2 (k x clamped to 126, where the sum is already 2^126
// and the quotient nothing): about half the operations of hn::Tanh (an Expm1
// and a division), and every score pays them. Where
// |x| << cap, the subtraction cancels: the error is then about two ulp of
// cap, absolute, below a score's own rounding once |x| passes a few units.
// NaN stays NaN (the clamp keeps it); +-inf gives +-cap.
template <class D, class V>
HWY_INLINE V Softcap(D d, V x, V k, V cap) {
  const V limit = hn::Set(d, 126.0f);
#if HWY_TARGET == HWY_WASM
  // f32x4.pmin (b < a ? b : a): one instruction, a NaN in a kept.
  const V y = V{__builtin_wasm_pmin_f32x4(hn::Mul(x, k).raw, limit.raw)};
#else
  // Not hn::Min, which may drop a NaN (it does on HWY_SCALAR).
  const V kx = hn::Mul(x, k);
  const V y = hn::IfThenElse(hn::Gt(kx, limit), limit, kx);
#endif
  const V sum = hn::Add(Exp2NonPositive(d, y), hn::Set(d, 1.0f));
  return hn::Sub(cap, hn::Div(hn::Add(cap, cap), sum));
}

// x[i] = cap * tanh(x[i] / cap) for i < count.
inline void SoftcapRun(float* HWY_RESTRICT x, size_t count, float cap) {
  const hn::ScalableTag<float> d;
  const hn::CappedTag<float, 1> d1;
  const size_t lanes = hn::Lanes(d);
  const float k = 2.0f * 1.44269504f / cap;
  size_t i = 0;
  for (; i + lanes <= count; i += lanes) {
    hn::StoreU(Softcap(d, hn::LoadU(d, x + i), hn::Set(d, k), hn::Set(d, cap)), d, x + i);
  }
  for (; i < count; ++i) {
    x[i] = hn::GetLane(Softcap(d1, hn::Set(d1, x[i]), hn::Set(d1, k), hn::Set(d1, cap)));
  }
}

// For queries i0 + q (q < n) and keys j0 + c (c < cols): soft-caps
// scores[c * key_stride + q], then, for the keys below the head's
// masked_keys (`keys`; c < masked_cols), adds unit * (the masks' bias), or
// -inf where the key is hidden from the query. `unit` is the factor the scores
// already carry beyond the head's scale (1, or log2(e) in base 2). Keys
// outer, queries contiguous: the flash tile's layout; a decode row is n = 1.
inline void ApplyScoreRule(const kernels::ScoreRule& r, size_t keys, size_t i0, size_t n,
                           size_t j0, size_t cols, size_t masked_cols, float unit,
                           float* HWY_RESTRICT scores, size_t key_stride) {
  if (r.softcap != 0.0f) {
    const float cap = r.softcap * unit;
    if (n == 1 && key_stride == 1) {
      SoftcapRun(scores, cols, cap);  // a decode row: its keys are contiguous
    } else {
      for (size_t c = 0; c < cols; ++c) SoftcapRun(scores + c * key_stride, n, cap);
    }
  }
  cols = masked_cols;
  if (r.alibi_slope != 0.0f) {
    // The bias is the slope times j - p_i, the difference taken in integers
    // and only then made a float: positions past 2^24 (a rolling cache's)
    // would round apart as floats. Per key it falls by one a query;
    // symmetric, its magnitude turns where the query passes the key.
    const float step = r.alibi_slope * unit;
    const int64_t p0 = static_cast<int64_t>(r.Position(i0));
    for (size_t c = 0; c < cols; ++c) {
      const int64_t base = static_cast<int64_t>(j0 + c) - p0;
      float* HWY_RESTRICT row = scores + c * key_stride;
      for (size_t q = 0; q < n; ++q) {
        const int64_t diff = base - static_cast<int64_t>(q);
        row[q] += step * static_cast<float>(r.alibi_symmetric ? -std::abs(diff) : diff);
      }
    }
  }
  // Each part loops only where it applies: a decode row that sees every key
  // of a sub-block costs three tests, not three per key.
  if (r.key_bias != nullptr) {
    for (size_t c = 0; c < cols; ++c) {
      const float bias = r.key_bias[j0 + c] * unit;
      for (size_t q = 0; q < n; ++q) scores[c * key_stride + q] += bias;
    }
  }
  if (r.mask != nullptr) {
    for (size_t c = 0; c < cols; ++c) {
      const float* HWY_RESTRICT mask = r.mask + i0 * r.mask_stride + j0 + c;
      for (size_t q = 0; q < n; ++q) scores[c * key_stride + q] += mask[q * r.mask_stride] * unit;
    }
  }
  // Causal and a window's right side: key j is hidden from the queries whose
  // horizon does not pass it, the first j + 1 - Horizon(i0) of them.
  const size_t horizon = r.Horizon(i0);
  for (size_t c = horizon > j0 ? horizon - j0 : 0; c < cols; ++c) {
    float* HWY_RESTRICT row = scores + c * key_stride;
    std::fill(row, row + HWY_MIN(n, j0 + c + 1 - horizon), -std::numeric_limits<float>::infinity());
  }
  // Key padding at either end of a query's keys (ScoreRule::Keys): set, not
  // added, so that a NaN key there stays unread.
  if (r.live_from != nullptr) {
    for (size_t q = 0; q < n; ++q) {
      const size_t i = i0 + q;
      const kernels::KeyRange reads = r.Keys(i, keys);
      const auto hide = [&](size_t from, size_t to) {
        for (size_t j = HWY_MAX(from, j0); j < HWY_MIN(to, j0 + cols); ++j) {
          scores[(j - j0) * key_stride + q] = -std::numeric_limits<float>::infinity();
        }
      };
      hide(HWY_MIN(r.Start(i), keys), reads.begin);
      hide(reads.end, HWY_MIN(r.Horizon(i), keys));
    }
  }
  // A window's left side: key j is hidden from the queries whose window
  // starts after it, from query j + window_left + 1 - Position(i0) on: fewer
  // for each later key, none from Start(i0 + n - 1) on.
  const size_t end = HWY_MIN(cols, r.Start(i0 + n - 1) > j0 ? r.Start(i0 + n - 1) - j0 : 0);
  for (size_t c = 0; c < end; ++c) {
    const size_t lead = j0 + c + r.window_left + 1, position = r.Position(i0);
    const size_t first = lead > position ? lead - position : 0;
    float* HWY_RESTRICT row = scores + c * key_stride;
    std::fill(row + first, row + n, -std::numeric_limits<float>::infinity());
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace mha
HWY_AFTER_NAMESPACE();

#endif  // MHA_SRC_KERNELS_SCORE_RULE_INL_H_
